#include "daemon/observe/fleet_view.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "fleetcron/cron.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::daemon {

namespace {

/// A run that started and is over: finished, or lost (its runner stopped
/// announcing itself while it ran), so a lost newest run is the last run.
bool over(FireFate fate) {
  return fate == FireFate::succeeded || fate == FireFate::failed || fate == FireFate::timed_out ||
         fate == FireFate::cancelled || fate == FireFate::lost;
}

}  // namespace

void read_job_ledger(FleetState& state, JobView& job) {
  const LedgerRead read = state.read_fires(job.key, fleet_view_ledger_depth);
  if (read.status != LedgerRead::Status::found) throw std::runtime_error(fmt::format("job \"{}\": {}", job.key, read.error));
  for (const auto& record : read.records) {  // newest scheduled instant first
    if (job.recent.size() < fleet_view_recent_runs) job.recent.push_back(record);
    if (record.fate == FireFate::running) job.running.push_back(record);
    if (!job.last_run && over(record.fate) && record.started_at) job.last_run = record;
    if (!job.last_success && record.fate == FireFate::succeeded) job.last_success = record;
    if (record.fate == FireFate::lost) ++job.lost;
  }
}

void copy_job_ledger(const JobView& from, JobView& to) {
  to.last_run = from.last_run;
  to.last_success = from.last_success;
  to.running = from.running;
  to.lost = from.lost;
  to.recent = from.recent;
}

bool job_failing(const JobView& job) {
  const bool failed = job.last_run && (job.last_run->fate == FireFate::failed ||
                                       job.last_run->fate == FireFate::timed_out || job.last_run->fate == FireFate::lost);
  return failed || job.lost > 0;
}

void find_next_fire(JobView& job, Instant from) {
  if (!job.catalogued) return;
  if (job.catalogued->removed) return;  // no next fire: no replica runs it now
  if (job.catalogued->spec.empty()) {
    job.next_error = "a schedule built in code, without a spec";
    return;
  }
  if (job.catalogued->spec == "@reboot") {
    job.next_error = "@reboot: it runs when a daemon starts, on that replica";
    return;
  }
  ParseOptions options;
  options.seconds = job.catalogued->seconds_field ? SecondsField::optional : SecondsField::none;
  options.every_anchor = EveryAnchor::epoch;
  try {
    options.zone = TimeZone::locate(job.catalogued->zone);
    const SchedulePtr schedule = parse_schedule(job.catalogued->spec, options);
    job.next_fire = schedule->next(from);
    if (job.next_fire) {
      if (const auto after = schedule->next(*job.next_fire)) job.interval = *after - *job.next_fire;
    }
  } catch (const std::exception& e) {
    job.next_error = e.what();
  }
}

FleetIndex read_fleet_index(FleetState& state, Instant at) {
  FleetIndex view;
  const RegistryRead registry = state.read_replicas(at);
  if (registry.status != RegistryRead::Status::found) throw std::runtime_error(registry.error);
  view.replicas = registry.replicas;
  const CatalogueRead catalogue = state.read_catalogue(at);
  if (catalogue.status != CatalogueRead::Status::found) throw std::runtime_error(catalogue.error);
  view.catalogue_error = catalogue.error;
  const ControlsRead controls = state.read_controls(at);
  if (controls.status != ControlsRead::Status::found) throw std::runtime_error(controls.error);
  std::map<std::string, IndexedJob> jobs;
  for (const auto& job : catalogue.jobs) jobs[job.job_key].catalogued = job;
  for (const auto& control : controls.jobs) jobs[control.job_key].control = control;
  view.jobs.reserve(jobs.size());
  for (auto& [key, job] : jobs) {
    job.key = key;
    view.jobs.push_back(std::move(job));
  }
  return view;
}

FleetView read_fleet_view(FleetState& state, Instant at) { return *read_fleet_view(state, at, [] { return false; }); }

std::optional<FleetView> read_fleet_view(FleetState& state, Instant at, const std::function<bool()>& stop) {
  FleetIndex index = read_fleet_index(state, at);
  FleetView view{std::move(index.replicas), {}};
  view.jobs.reserve(index.jobs.size());
  for (const auto& indexed : index.jobs) {
    if (stop()) return std::nullopt;
    JobView job = indexed.view();
    find_next_fire(job, at);
    read_job_ledger(state, job);
    view.jobs.push_back(std::move(job));
  }
  return view;
}

}  // namespace fleetcron::daemon
