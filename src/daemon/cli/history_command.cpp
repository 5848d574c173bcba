// `fleetcron history`: a job's run ledger, read from the coordination store.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "daemon/observe/job_lookup.h"
#include "daemon/observe/json_output.h"
#include "daemon/observe/log_sink.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/fleet.h"

namespace fleetcron::daemon {

namespace {

/// One line per record; text from the store is escaped.
std::string record_line(const FireRecord& r) {
  std::string line = fmt::format("{}  {:<9}", format_rfc3339(r.scheduled_at), to_string(r.fate));
  if (r.manual) line += "  manual";
  line += fmt::format("  on {}", terminal_safe(r.replica_id));
  if (r.fence != 0) line += fmt::format("  fence {}", r.fence);
  if (r.started_at && r.fate != FireFate::running) line += fmt::format("  took {}", format_duration(r.duration));
  if (r.attempts > 1) line += fmt::format("  attempts {}", r.attempts);
  if (r.exit_status) line += fmt::format("  exit {}", *r.exit_status);
  if (r.signal) line += fmt::format("  signal {}", *r.signal);
  if (r.fate == FireFate::missed) {
    line += fmt::format("  {} instants to {}", r.missed_count, r.last_missed ? format_rfc3339(*r.last_missed) : "?");
  }
  if (!r.reason.empty()) line += "  " + terminal_safe(r.reason);
  if (!r.error.empty()) line += ": " + terminal_safe(r.error);
  return line + "\n";
}

}  // namespace

std::shared_ptr<FleetState> open_fleet_state(const Settings& settings) {
  return backend_for(settings.coordinator).open_fleet_state(settings);
}

namespace {

/// The newest `count` records of every job the catalogue names, newest
/// scheduled instant first.
LedgerRead fleet_history(Fleet& fleet, std::size_t count) {
  const CatalogueRead catalogue = fleet.jobs();
  if (catalogue.status != CatalogueRead::Status::found) return {LedgerRead::Status::error, {}, catalogue.error};
  LedgerRead all{LedgerRead::Status::found, {}, {}};
  for (const auto& job : catalogue.jobs) {
    LedgerRead read = fleet.history(job.job_key, count);
    if (read.status != LedgerRead::Status::found) {
      return {LedgerRead::Status::error, {}, fmt::format("job \"{}\": {}", job.job_key, read.error)};
    }
    all.records.insert(all.records.end(), read.records.begin(), read.records.end());
  }
  std::stable_sort(all.records.begin(), all.records.end(),
                   [](const FireRecord& a, const FireRecord& b) { return a.scheduled_at > b.scheduled_at; });
  if (all.records.size() > count) all.records.resize(count);
  return all;
}

}  // namespace

int run_history_command(const Settings& settings, const std::string& job, std::size_t count, bool json,
                        std::ostream& out, std::ostream& err) {
  if (backend_for(settings.coordinator).in_process()) {
    err << "history: the memory coordinator keeps no state outside its process; use redis://, nats:// or postgres://\n";
    return 2;
  }
  try {
    Fleet fleet(open_fleet_state(settings));
    const LedgerRead read = job.empty() ? fleet_history(fleet, count) : fleet.history(job, count);
    if (read.status != LedgerRead::Status::found) {
      err << "history: " << terminal_safe(read.error) << '\n';
      return 1;
    }
    if (!job.empty() && read.records.empty()) {  // a removed job's records still show; a typo has none
      const JobLookup lookup = look_up_job(fleet.state(), fleet.now(), job, false, false);
      if (!lookup.known) {
        err << "history: " << lookup.refusal << '\n';
        return 2;
      }
    }
    if (json) {
      out << history_document(job.empty() ? std::nullopt : std::optional<std::string>(job), read.records) << '\n';
      return 0;
    }
    if (read.records.empty()) {
      out << (job.empty() ? std::string("no records") : "job \"" + terminal_safe(job) + "\": no records") << '\n';
    }
    for (const auto& record : read.records) out << (job.empty() ? terminal_safe(record.job_key) + "  " : "") << record_line(record);
    return 0;
  } catch (const std::exception& e) {
    err << "history: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
