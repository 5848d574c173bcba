// `fleetcron logs`: the output of a past run, as this host keeps it
// (run_output.h), and where it is when it is not here.
#include <fmt/format.h>

#include <chrono>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "daemon/run/run_output.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

/// The bytes `logs` prints of one run: the most a run keeps, and the
/// attempts' markers.
constexpr std::size_t max_printed_bytes = std::size_t{1} << 30;

std::string describe(const KeptRun& run) {
  const auto age = std::chrono::file_clock::now() - run.modified;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(age).count();
  return fmt::format("{}  {:<9}  {} bytes  on {}  {} s ago", terminal_safe(run.fire_key.empty() ? run.path.filename().string() : run.fire_key),
                     to_string(run.state), run.bytes, terminal_safe(run.replica_id), seconds);
}

/// The job's ledger records, to say where a run that is not here ran;
/// empty without a fleet state (the memory coordinator) or when it fails.
std::vector<FireRecord> ledger_of(const Settings& settings, const std::string& job, std::string& error) {
  if (backend_for(settings.coordinator).in_process()) return {};
  try {
    const auto state = open_fleet_state(settings);
    LedgerRead read = state->read_fires(job, 100);
    if (read.status == LedgerRead::Status::found) return std::move(read.records);
    error = read.error;
  } catch (const std::exception& e) {
    error = e.what();
  }
  return {};
}

}  // namespace

int run_logs_command(const Settings& settings, const std::string& job, const std::string& fire, bool list,
                     std::ostream& out, std::ostream& err) {
  if (settings.output_dir.empty()) {
    err << "logs: this host keeps no runs' output (output_dir = none)\n";
    return 1;
  }
  const std::vector<KeptRun> runs = kept_runs(settings.output_dir, job);
  if (list) {
    for (const auto& run : runs) out << describe(run) << '\n';
    if (runs.empty()) err << "logs: no run of job \"" << terminal_safe(job) << "\" is kept in " << settings.output_dir << '\n';
    return runs.empty() ? 1 : 0;
  }
  if (const auto run = select_kept_run(runs, job, fire)) {
    try {
      const std::string text = read_kept_output(*run, max_printed_bytes);
      err << "# " << terminal_safe(job) << "  " << describe(*run) << '\n';
      out << text;
      return 0;
    } catch (const std::exception& e) {
      err << "logs: " << terminal_safe(e.what()) << '\n';
      return 1;
    }
  }
  std::string store_error;
  const std::vector<FireRecord> ledger = ledger_of(settings, job, store_error);
  err << "logs: " << terminal_safe(explain_missing_output(settings.output_dir, job, fire, ledger));
  if (!store_error.empty()) err << " (the ledger could not be read: " << terminal_safe(store_error) << ")";
  err << '\n';
  return 1;
}

}  // namespace fleetcron::daemon
