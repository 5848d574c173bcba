// fleetcron — the replica registry, kept in the fleet state: each replica's
// record (who, where, since when, with which settings), heartbeated, and
// the check that refuses claims to a replica whose deduplication settings
// differ from the fleet's (docs/fleet-state.md#replica-registry).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// One setting the deduplication depends on, as the replica states it
/// (claim TTL, skew guard, prefixes and buckets, lease TTL, mode): two
/// replicas with different values would not deduplicate each other.
struct FLEETCRON_API ReplicaSetting {
  std::string name;   ///< 1 to 64 characters, no whitespace; unique per replica
  std::string value;  ///< at most 256 bytes
  friend bool operator==(const ReplicaSetting&, const ReplicaSetting&) = default;
};

/// A run in progress on a replica, as its record lists it: a replica whose
/// record expires with runs listed lost them (docs/fleet-state.md#lost-runs).
struct FLEETCRON_API RunningFire {
  std::string job_key;   ///< at most 1,024 bytes
  std::string fire_key;  ///< at most 2,048 bytes
  Instant scheduled_at{};
  std::uint64_t fence = 0;
  Instant started_at{};
  int recovery = 0;  ///< FireContext::recovery of the run
  bool manual = false;  ///< a triggered run: reported lost, never re-run
  friend bool operator==(const RunningFire&, const RunningFire&) = default;
};

/// What a replica says of itself.
struct FLEETCRON_API ReplicaAnnouncement {
  std::string replica_id;  ///< 1 to 64 characters, no whitespace
  std::string host = {};     ///< at most 255 bytes
  std::int64_t pid = 0;
  std::string version = {};  ///< at most 64 bytes
  Instant started{};
  /// Identifies the jobs it runs (keys and schedules): a replica with
  /// other jobs is reported, not refused. At most 64 bytes.
  std::string jobs_digest = {};
  std::vector<ReplicaSetting> settings = {};  ///< at most max_replica_settings
  std::vector<RunningFire> runs = {};         ///< at most max_listed_runs
  friend bool operator==(const ReplicaAnnouncement&, const ReplicaAnnouncement&) = default;
};

/// A replica's record in the registry.
struct FLEETCRON_API ReplicaRecord {
  ReplicaAnnouncement replica;
  Instant beat{};        ///< its last announcement, on its clock
  Instant expires_at{};  ///< gone from the registry from then on, unless it announces again
  /// Whether its settings were the fleet's at its last announcement (a
  /// refused replica claims nothing).
  bool accepted = false;
  friend bool operator==(const ReplicaRecord&, const ReplicaRecord&) = default;
};

/// One setting that differs from the fleet's ("" for a setting one side lacks).
struct FLEETCRON_API SettingDifference {
  std::string name;
  std::string here;
  std::string fleet;
  friend bool operator==(const SettingDifference&, const SettingDifference&) = default;
};

/// The answer to FleetState::announce_replica().
struct FLEETCRON_API ReplicaAnnounce {
  enum class Status {
    accepted,  ///< its settings are the fleet's: it may claim
    refused,   ///< they differ from `reference`'s (`differences`): it must not claim
    error,     ///< the store failed, or a bound was reached; `error` says what (callers fail closed)
    busy,      ///< asked for a job alone: another live replica runs it (`busy_on`, `busy_run`); nothing written
  };
  Status status = Status::error;
  /// The replica whose settings are the fleet's, when it is another one.
  std::optional<ReplicaRecord> reference;
  std::vector<SettingDifference> differences = {};
  /// Live replicas whose jobs digest differs from this one's ("<id> on <host>"): reported, not refused.
  std::vector<std::string> other_jobs = {};
  /// Set when the registry held something that is not a registry, which
  /// this announcement replaced (the records in it are lost; the other
  /// replicas write theirs again at their next announcement): what it held.
  std::string replaced = {};
  /// The records this announcement dropped because they had expired: of
  /// all replicas, only the one whose write dropped a record learns of it
  /// here, so a dead replica's runs are reported lost once.
  std::vector<ReplicaRecord> expired = {};
  std::string error = {};
  /// Whether this replica's earlier record (the same start) was in the
  /// registry, live or expired: false at its first announcement, and
  /// after the store lost the registry (a restart without persistence, a
  /// FLUSHALL, a lost volume), which a replica that announced before so
  /// learns of.
  bool found_own = false;
  /// busy: the replica listing a run of the job, and that run.
  std::string busy_on = {};
  std::optional<RunningFire> busy_run = {};
  /// Of several jobs asked alone at once: those another live replica
  /// runs, left out of the record written (each with busy_on and busy_run
  /// set, status busy). Empty when none was, or one job was asked.
  struct BusyJob {
    std::string job_key;
    std::string busy_on;
    RunningFire busy_run;
  };
  std::vector<BusyJob> busy_jobs = {};
  /// Of several jobs asked alone at once: those whose run did not fit in
  /// the record (max_replica_record_bytes: the runs listed first stay),
  /// left out of it like the busy ones, but not known to be busy.
  std::vector<std::string> unlisted_jobs = {};
  /// A hash of the other live replicas' ids and jobs digests: it changes
  /// when one of them changes its jobs (a reload), even among other_jobs.
  std::uint64_t others_jobs_fingerprint = 0;
};

/// The answer to FleetState::read_replicas().
struct FLEETCRON_API RegistryRead {
  enum class Status { found, error };
  Status status = Status::found;
  std::vector<ReplicaRecord> replicas = {};  ///< oldest start first (ties: by id)
  std::string error = {};
};

/// Bounds of the registry: replicas at once, settings per replica, the
/// size of the document that holds them all, and a record's time to live.
inline constexpr std::size_t max_registered_replicas = 256;
inline constexpr std::size_t max_replica_settings = 32;
inline constexpr std::size_t max_listed_runs = 64;
/// A record beyond it lists fewer runs (its newest dropped).
inline constexpr std::size_t max_replica_record_bytes = 16 * 1024;
inline constexpr std::size_t max_registry_bytes = 900 * 1024;
inline constexpr std::chrono::nanoseconds min_replica_ttl = std::chrono::milliseconds{10};
inline constexpr std::chrono::nanoseconds max_replica_ttl = std::chrono::hours{1};

/// Throws std::invalid_argument naming the field unless the announcement
/// keeps the bounds above (see each field).
FLEETCRON_API void check_replica_announcement(const ReplicaAnnouncement& replica);

/// A hash of the settings, whatever their order: 16 hexadecimal digits.
[[nodiscard]] FLEETCRON_API std::string settings_fingerprint(std::span<const ReplicaSetting> settings);

/// What differs between two replicas' settings, by name in order.
[[nodiscard]] FLEETCRON_API std::vector<SettingDifference> compare_settings(std::span<const ReplicaSetting> here,
                                                                           std::span<const ReplicaSetting> fleet);

}  // namespace fleetcron
