// The fleet as its state tells it, for `status` and the per-job metrics:
// the replicas, and per job its spec, next fire, last run, last success,
// runs in progress and controls (docs/daemon.md#status).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fleetcron/fleet_state.h"

namespace fleetcron::daemon {

/// How many of each job's newest ledger records are read: its last run,
/// last success and lost runs are found among them.
inline constexpr std::size_t fleet_view_ledger_depth = 100;
/// How many of them each job keeps in full (the status page's recent runs).
inline constexpr std::size_t fleet_view_recent_runs = 10;

/// One job as the fleet state tells it.
struct JobView {
  std::string key;
  std::optional<CataloguedJob> catalogued;
  std::optional<Instant> next_fire;
  std::string next_error;  // why there is no next fire, if it is an error
  std::optional<FireRecord> last_run, last_success;
  std::vector<FireRecord> running;
  std::optional<JobControl> control;
  std::optional<std::chrono::nanoseconds> interval;  // between the next two fires
  std::size_t lost = 0;                               // lost records among the newest read
  std::vector<FireRecord> recent;                     // the newest fleet_view_recent_runs records
};

struct FleetView {
  std::vector<ReplicaRecord> replicas;
  std::vector<JobView> jobs;
};

/// Reads the registry, the catalogue, the controls and each job's ledger
/// (one read per job). Throws std::runtime_error naming what failed.
[[nodiscard]] FleetView read_fleet_view(FleetState& state, Instant at);

}  // namespace fleetcron::daemon
