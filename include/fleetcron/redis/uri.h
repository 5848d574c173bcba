// fleetcron::redis — coordinator URIs for Redis: server, credentials,
// database and timeouts in one string.
#pragma once

#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/redis/client_options.h"
#include "fleetcron/uri_error.h"

namespace fleetcron::redis {

/// What a Redis URI says: how to connect. The same shape as
/// nats::UriOptions and postgres::UriOptions (a Redis URI sets no names:
/// key prefixes are the claimer's and fleet state's options).
struct FLEETCRON_API UriOptions {
  ClientOptions connection;
};

/// Parses
///   redis://[user[:password]@]host[:port][/db][?option=value&...]
///   rediss://… (the same, over TLS)
///   redis-sentinel://[user[:password]@]host[:port][,host[:port]…]/MASTER[/db][?…]
///   rediss-sentinel://… (sentinels and primary over TLS)
///   unix:PATH[?option=value&...]      unix://[user[:password]@]PATH[?...]
/// onto `base` (defaults for what the URI leaves out). host may be a name,
/// an IPv4 address or [IPv6]; user and password are percent-decoded.
/// Options: db (unix), connect_timeout, request_timeout (command_timeout is
/// accepted for it too; durations such as
/// 500ms), pool_size, password and user (unix); with rediss:// also
/// tls_ca_file, tls_ca_dir, tls_cert_file, tls_key_file, tls_server_name
/// and tls_verify (true|false; see ClientOptions); with a sentinel scheme
/// also sentinel_user and sentinel_password (the userinfo is the
/// primary's; a sentinel's port defaults to 26379). Throws UriError naming
/// the part, the URI shown with its secrets as "***".
[[nodiscard]] FLEETCRON_API UriOptions parse_uri(std::string_view uri, ClientOptions base = {});

/// True if `uri` has one of the schemes parse_uri() reads.
[[nodiscard]] FLEETCRON_API bool is_redis_uri(std::string_view uri) noexcept;

}  // namespace fleetcron::redis
