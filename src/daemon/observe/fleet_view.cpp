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

void read_ledger(FleetState& state, JobView& job) {
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

}  // namespace

FleetView read_fleet_view(FleetState& state, Instant at) {
  FleetView view;
  const RegistryRead registry = state.read_replicas(at);
  if (registry.status != RegistryRead::Status::found) throw std::runtime_error(registry.error);
  view.replicas = registry.replicas;
  const CatalogueRead catalogue = state.read_catalogue(at);
  if (catalogue.status != CatalogueRead::Status::found) throw std::runtime_error(catalogue.error);
  const ControlsRead controls = state.read_controls(at);
  if (controls.status != ControlsRead::Status::found) throw std::runtime_error(controls.error);
  std::map<std::string, JobView> jobs;
  for (const auto& job : catalogue.jobs) jobs[job.job_key].catalogued = job;
  for (const auto& control : controls.jobs) jobs[control.job_key].control = control;
  for (auto& [key, job] : jobs) {
    job.key = key;
    find_next_fire(job, at);
    read_ledger(state, job);
    view.jobs.push_back(std::move(job));
  }
  return view;
}

}  // namespace fleetcron::daemon
