// Builds the claimer and elector the daemon's settings ask for, on memory,
// Redis or NATS, wrapped so every call is timed and its failures counted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "daemon/log_sink.h"
#include "daemon/metrics.h"
#include "daemon/settings.h"
#include "fleetcron/coordination.h"
#include "fleetcron/nats/connection.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/eviction_policy.h"

namespace fleetcron::daemon {

struct Coordination {
  std::shared_ptr<Claimer> claimer;  // set for claim and both
  std::shared_ptr<Elector> elector;  // set for leader and both
  std::string description;           // no secrets
  /// True while the backend answers (readiness).
  std::function<bool()> reachable;
  /// Backend clock minus local clock, when known (Redis).
  std::function<std::optional<double>()> clock_offset;
  /// Redis: what the server's maxmemory-policy is (one round trip).
  std::function<redis::EvictionPolicy()> eviction_policy;
  std::shared_ptr<void> resources;   // connections and the like, kept alive
};

/// Parses a NATS coordinator URI
///   nats://[user:password@]host:port[,host:port…][?bucket=…&leader_bucket=…&key=…]
/// into connection options; its query sets `settings`' buckets and key.
/// Checks the leader key and TTL for NATS. Throws std::invalid_argument.
[[nodiscard]] nats::ConnectionOptions parse_nats_uri(const std::string& uri, Settings& settings);

/// The coordinator URI's Redis options, with the password from
/// Settings::coordinator_password when one was given that way.
[[nodiscard]] redis::ClientOptions redis_options(const Settings& settings);

/// The claimer the settings ask for, without connecting (claims fail):
/// its dedup window and key rules are the real one's. nullptr in leader
/// mode. For `fleetcron validate`. Throws std::invalid_argument.
[[nodiscard]] std::shared_ptr<Claimer> make_offline_claimer(const Settings& settings);

/// Never blocks on the network: a NATS server that is down at start-up is
/// connected to in the background (calls fail closed meanwhile). Throws
/// std::invalid_argument for bad URIs or options.
[[nodiscard]] Coordination make_coordination(const Settings& settings, Metrics& metrics, LogSink& log);

}  // namespace fleetcron::daemon
