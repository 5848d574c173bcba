// fleetcron::nats — coordinator URIs for NATS: servers, credentials and the
// coordination's bucket and key names in one string.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/nats/connection_options.h"
#include "fleetcron/uri_error.h"

namespace fleetcron::nats {

/// What a NATS URI says: how to connect, and the names it sets.
struct FLEETCRON_API UriOptions {
  ConnectionOptions connection;
  std::optional<std::string> claim_bucket;   ///< ?bucket=
  std::optional<std::string> leader_bucket;  ///< ?leader_bucket=
  std::optional<std::string> leader_key;     ///< ?key=
  /// ?replicas=1..5: the JetStream replicas of every bucket the URI's user
  /// creates (a cluster of at least that many servers).
  std::optional<int> replicas;
};

/// Parses
///   nats://[user:password@|token@]host[:port][,host[:port]…][?option=value&…]
/// (tls:// for TLS) onto `base`. User, password and token are
/// percent-decoded (a password may hold any byte as %XX, and a literal '%'
/// is written %25); everything up to
/// the last '@' is the user information, so an unescaped '?', '/' or ','
/// in a password stays in the password. Options: bucket, leader_bucket,
/// key (the coordination's names), replicas (1..5, for the buckets it
/// creates), connect_timeout, request_timeout (durations such as 500ms). Throws UriError naming the part, the URI
/// shown with its secrets as "***".
[[nodiscard]] FLEETCRON_API UriOptions parse_uri(std::string_view uri, ConnectionOptions base = {});

}  // namespace fleetcron::nats
