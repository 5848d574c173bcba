// fleetcron — the job catalogue, kept in the fleet state: which jobs the
// fleet runs and on which schedules, written by its replicas, so that a
// command needing no jobs file can tell each job's next fire
// (docs/fleet-state.md#job-catalogue).
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
  /// With `error`: why nothing was read (the store). With `found`, if not
  /// empty: a part that held something else, whose jobs are left out.
  std::string error = {};
};

/// Bounds of the catalogue: jobs, each of its parts' size (under NATS's
/// default max_payload of 1 MiB; FleetDocuments::catalogue_parts parts,
/// so about 9 MiB in all once keys spread, about 100 bytes a job), and how
/// long a job no replica mentions again stays (replicas mention theirs
/// every hour and when they change).
inline constexpr std::size_t max_catalogued_jobs = 100'000;
inline constexpr std::size_t max_catalogue_bytes = 900 * 1024;
inline constexpr std::chrono::nanoseconds catalogue_keep_for = std::chrono::hours{48};

/// The catalogue part that keeps `job_key`'s line: a 64-bit FNV-1a hash
/// of the key, modulo FleetDocuments::catalogue_parts (stable across
/// releases and platforms: every replica must agree).
[[nodiscard]] FLEETCRON_API std::uint32_t catalogue_part(std::string_view job_key) noexcept;

}  // namespace fleetcron
