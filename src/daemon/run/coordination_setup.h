// Builds the claimer and elector the daemon's settings ask for, on memory,
// Redis or NATS, wrapped so every call is timed and its failures counted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/observe/metrics.h"
#include "daemon/config/settings.h"
#include "fleetcron/coordination.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/nats/connection.h"
#include "fleetcron/postgres/uri.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/eviction_policy.h"

namespace fleetcron::daemon {

struct Coordination {
  std::shared_ptr<Claimer> claimer;  // set for claim and both
  std::shared_ptr<Elector> elector;  // set for leader and both
  /// The fleet state (Redis, NATS; in memory for the memory coordinator,
  /// where it lives and dies with the process); null when catch-up and the
  /// ledger are both off.
  std::shared_ptr<FleetState> fleet_state;
  std::string description;           // no secrets
  /// Asks the backend for an answer (readiness, the start's check):
  /// returns if it answered, throws BackendError saying why not (AuthError
  /// and ConfigError: refused for good, not an outage).
  std::function<void()> ping;
  /// Backend clock minus local clock, when known (the claimer's measure).
  std::function<std::optional<double>()> clock_offset;
  /// Redis: what the server's maxmemory-policy is (one round trip).
  std::function<redis::EvictionPolicy()> eviction_policy;
  /// PostgreSQL: what the schema lacks (one line each; empty: complete).
  /// Throws BackendError when the server cannot be asked.
  std::function<std::vector<std::string>()> schema_problems;
  /// Worth a warning at start: an event name and its message each (e.g. a
  /// TLS connection whose certificate is not verified).
  std::vector<std::pair<std::string, std::string>> warnings;
  std::shared_ptr<void> resources;   // connections and the like, kept alive
  /// What the replica registry compares between replicas (dedup_settings()).
  std::vector<ReplicaSetting> replica_settings;
};

/// The settings two replicas of one fleet must share, or their claims and
/// leases would not deduplicate each other: the mode, and for claims the
/// claim TTL, skew guard and claim prefix (Redis) or bucket (NATS), for
/// leadership the lease TTL and key (and bucket). Durations as
/// format_duration() writes them, defaults resolved.
[[nodiscard]] std::vector<ReplicaSetting> dedup_settings(const Settings& settings);

/// A NATS coordinator URI (nats::parse_uri) as connection options; its
/// query sets `settings`' buckets and key, Settings::coordinator_password
/// the password or token. Checks the leader key and TTL with the NATS
/// library's rules. Throws std::invalid_argument (UriError for the URI).
[[nodiscard]] nats::ConnectionOptions parse_nats_uri(const std::string& uri, Settings& settings);

/// A PostgreSQL coordinator URI's options: Settings::coordinator_password
/// the password, Settings::leader_key the election name. Throws UriError.
[[nodiscard]] postgres::UriOptions postgres_options(const Settings& settings);
/// The coordinator URI's Redis options, with the password from
/// Settings::coordinator_password when one was given that way.
[[nodiscard]] redis::ClientOptions redis_options(const Settings& settings);
/// The Redis claimer's options the settings ask for (`run` and `init`).
[[nodiscard]] redis::ClaimerOptions redis_claimer_options(const Settings& settings);
/// The NATS claims bucket the settings ask for (`run` and `init`).
[[nodiscard]] nats::BucketConfig claim_bucket_config(const Settings& settings);

/// The claimer the settings ask for, without connecting (claims fail):
/// its dedup window and key rules are the real one's. nullptr in leader
/// mode. For `fleetcron validate`. Throws std::invalid_argument.
[[nodiscard]] std::shared_ptr<Claimer> make_offline_claimer(const Settings& settings);

/// Redis and NATS connect lazily (calls fail closed until the server
/// answers; NATS makes one connect attempt, bounded by its connect timeout,
/// as it binds its buckets). `holder` names this replica as a leader
/// candidate (the replica id; empty: each elector's own random one).
/// Throws std::invalid_argument for bad URIs or options.
[[nodiscard]] Coordination make_coordination(const Settings& settings, Metrics& metrics,
                                             const std::string& holder = {});

}  // namespace fleetcron::daemon
