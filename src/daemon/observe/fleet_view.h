// The fleet as its state tells it, for `status` and the per-job metrics:
// the replicas, and per job its spec, next fire, last run, last success,
// runs in progress and controls (docs/daemon.md#status).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
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
/// The same, asking `stop` before each ledger read: nullopt once it says so.
[[nodiscard]] std::optional<FleetView> read_fleet_view(FleetState& state, Instant at, const std::function<bool()>& stop);

/// A job as the fleet's index tells it: a third of a JobView's size.
struct IndexedJob {
  std::string key;
  std::optional<CataloguedJob> catalogued;
  std::optional<JobControl> control;
  [[nodiscard]] JobView view() const { return JobView{key, catalogued, {}, {}, {}, {}, {}, control, {}, 0, {}}; }
};
struct FleetIndex {
  std::vector<ReplicaRecord> replicas;
  std::vector<IndexedJob> jobs;  // by key
  std::string catalogue_error;   // a part of the catalogue that held something else: its jobs are left out
};

/// The index alone: the registry, the catalogue and the controls (34
/// document reads, whatever the number of jobs), each job with its
/// catalogue line and control, by key; no ledger read, no next fire. A
/// view of 100,000 jobs reads this, then the ledger of the jobs it shows.
[[nodiscard]] FleetIndex read_fleet_index(FleetState& state, Instant at);
/// Fills `job`'s ledger fields (last run, last success, running, lost,
/// recent) from one read; throws std::runtime_error naming the job.
void read_job_ledger(FleetState& state, JobView& job);
/// Fills `job`'s next fire (and interval, or why there is none) from its
/// catalogue line, after `from`.
void find_next_fire(JobView& job, Instant from);
/// Copies the ledger fields of `from` into `to` (a cached read).
void copy_job_ledger(const JobView& from, JobView& to);
/// Whether `job`'s newest finished run failed, timed out or was lost, or
/// lost runs are among its newest records (its ledger fields read).
[[nodiscard]] bool job_failing(const JobView& job);

}  // namespace fleetcron::daemon
