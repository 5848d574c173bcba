// fleetcron — the job catalogue, kept in the fleet state: which jobs the
// fleet runs and on which schedules, written by its replicas, so that a
// command needing no jobs file can tell each job's next fire
// (docs/fleet-state.md#job-catalogue).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// A job as a replica running it describes it.
struct FLEETCRON_API CataloguedJob {
  std::string job_key;
  /// The schedule's spec (Schedule::spec(); empty for one built in code)
  /// and time zone, and whether the spec has a seconds field.
  std::string spec = {};
  std::string zone = {};
  bool seconds_field = false;
  Instant seen{};            ///< when a replica last said it runs the job
  std::string seen_by = {};  ///< that replica
  /// EntryScope::replica: every replica runs it, each its own fires.
  bool every_replica = false;
  /// When seen_by stopped running it (a reload dropped it from its jobs),
  /// if no replica mentioned it since.
  std::optional<Instant> removed = {};
  friend bool operator==(const CataloguedJob&, const CataloguedJob&) = default;
};

/// The answer to FleetState::read_catalogue().
struct FLEETCRON_API CatalogueRead {
  enum class Status { found, error };
  Status status = Status::found;
  std::vector<CataloguedJob> jobs = {};  ///< by job key
  std::string error = {};
};

/// Bounds of the catalogue: jobs, the document's size (under NATS's
/// default max_payload of 1 MiB), and how long a job no replica mentions
/// again stays (replicas mention theirs every hour and when they change).
inline constexpr std::size_t max_catalogued_jobs = 10'000;
inline constexpr std::size_t max_catalogue_bytes = 900 * 1024;
inline constexpr std::chrono::nanoseconds catalogue_keep_for = std::chrono::hours{48};

/// The catalogue as the stores keep it: one line per job, "1 <job> <spec>
/// <zone> <seconds 0|1> <seen µs> <seen by>", text percent-encoded as in
/// fire records ("-" for empty); a job every replica runs
/// (every_replica) is "2 … <seen by> replica" instead. Fleet jobs keep the
/// version-1 line, which every earlier release reads; a version-2 line is
/// read by this release on (an earlier one rebuilds the catalogue without
/// it: upgrade every replica before using scope=replica). A removed job is
/// "3 <job> <spec> <zone> <seconds> <seen µs> <seen by> fleet|replica
/// <removed µs>", read by release 0.2 on (an earlier one rebuilds the
/// catalogue; its replicas mention their jobs again within the hour).
[[nodiscard]] FLEETCRON_API std::string format_job_catalogue(std::span<const CataloguedJob> jobs);
/// The jobs in that text; nullopt if it is not such a document.
[[nodiscard]] FLEETCRON_API std::optional<std::vector<CataloguedJob>> parse_job_catalogue(std::string_view text);

}  // namespace fleetcron
