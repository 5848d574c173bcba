// fleetcron::redis — coordinator URIs for Redis: server, credentials,
// database and timeouts in one string.
#pragma once

#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/redis/client_options.h"
#include "fleetcron/uri_error.h"

namespace fleetcron::redis {

/// Parses
///   redis://[user[:password]@]host[:port][/db][?option=value&...]
///   unix:PATH[?option=value&...]      unix://[user[:password]@]PATH[?...]
/// onto `base` (defaults for what the URI leaves out). host may be a name,
/// an IPv4 address or [IPv6]; user and password are percent-decoded.
/// Options: db (unix), connect_timeout, request_timeout (command_timeout is
/// accepted for it too; durations such as
/// 500ms), pool_size, password and user (unix). rediss:// is refused:
/// hiredis 0.14 has no TLS. Throws UriError.
[[nodiscard]] FLEETCRON_API ClientOptions parse_uri(std::string_view uri, ClientOptions base = {});

}  // namespace fleetcron::redis
