// `fleetcron status`: the leader, recent claims (Redis), and from the
// fleet state the replicas and each job's next fire, last run, last
// success, runs in progress and controls. Reads only; runs nothing.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "daemon/observe/fleet_view.h"
#include "daemon/observe/json_output.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/store_clock.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::daemon {

namespace {

Instant now() {
  return Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())};
}

std::string ago(Instant then, Instant at) {
  return then <= at ? format_duration(std::chrono::floor<std::chrono::milliseconds>(at - then)) + " ago" : "ahead";
}

/// The digest most replicas announce (ties: the oldest's); the status page
/// uses the same rule (status_page.html, commonDigest).
std::string common_jobs_digest(const std::vector<ReplicaRecord>& replicas) {
  std::map<std::string, std::size_t> counts;
  for (const auto& r : replicas) ++counts[r.replica.jobs_digest];
  std::string best = replicas.empty() ? std::string() : replicas.front().replica.jobs_digest;
  for (const auto& [digest, count] : counts) {
    if (count > counts[best]) best = digest;
  }
  return best;
}

std::string replica_text(const ReplicaRecord& r, Instant at, const std::string& common_digest, std::size_t common_count) {
  const ReplicaAnnouncement& a = r.replica;
  const std::string other =
      a.jobs_digest == common_digest ? "" : fmt::format(" (OTHER jobs than {} replica(s))", common_count);
  return fmt::format("  {}  on {}  pid {}  version {}  started {}  beat {}  {}  settings {}  jobs {}{}\n",
                     terminal_safe(a.replica_id), terminal_safe(a.host.empty() ? "?" : a.host), a.pid,
                     terminal_safe(a.version.empty() ? "?" : a.version), format_rfc3339(a.started), ago(r.beat, at),
                     r.accepted ? "accepted" : "REFUSED (settings differ from the fleet's)",
                     settings_fingerprint(a.settings), terminal_safe(a.jobs_digest), other);
}

std::string run_text(const FireRecord& r) {
  std::string text = fmt::format("{} {} on {}", format_rfc3339(r.scheduled_at), to_string(r.fate), terminal_safe(r.replica_id));
  if (r.fate != FireFate::running) text += fmt::format(" (took {})", format_duration(r.duration));
  if (r.exit_status && *r.exit_status != 0) text += fmt::format(", exit {}", *r.exit_status);
  if (r.signal) text += fmt::format(", signal {}", *r.signal);
  return text;
}

std::string job_text(const JobView& job) {
  std::string text = "  " + terminal_safe(job.key);
  if (job.catalogued) {
    text += fmt::format("  \"{}\" {}", terminal_safe(job.catalogued->spec), terminal_safe(job.catalogued->zone));
    if (job.catalogued->every_replica) text += "  scope=replica (every replica runs it)";
    if (job.catalogued->removed) {
      text += fmt::format("  REMOVED from the jobs of {} at {}", terminal_safe(job.catalogued->seen_by),
                          format_rfc3339(*job.catalogued->removed));
    }
  }
  text += "\n";
  text += fmt::format("    next          {}\n", job.next_fire   ? format_rfc3339(*job.next_fire)
                                                 : !job.next_error.empty() ? "unknown: " + terminal_safe(job.next_error)
                                                 : job.catalogued           ? "none"
                                                                            : "unknown (no replica runs it)");
  text += fmt::format("    last run      {}\n", job.last_run ? run_text(*job.last_run) : "none in the ledger");
  text += fmt::format("    last success  {}\n", job.last_success ? format_rfc3339(job.last_success->scheduled_at)
                                                                   : "none in the ledger");
  if (job.running.empty()) text += "    running       no\n";
  for (const auto& run : job.running) {
    text += fmt::format("    running       {} since {}\n", run_text(run),
                        run.started_at ? format_rfc3339(*run.started_at) : "?");
  }
  const bool paused = job.control && job.control->paused;
  text += fmt::format("    paused        {}\n", paused ? fmt::format("yes, by {} at {}", terminal_safe(job.control->changed_by),
                                                                     format_rfc3339(job.control->changed_at))
                                                     : "no");
  if (job.control && !job.control->triggers.empty()) {
    text += fmt::format("    triggers      {} waiting\n", job.control->triggers.size());
  }
  return text;
}

void print_replicas(const StoreView& store, const std::vector<ReplicaRecord>& replicas, Instant at, std::ostream& out) {
  out << "coordinator: " << store.coordinator << '\n' << store.text;
  out << fmt::format("replicas ({}):\n", replicas.size());
  const std::string common = common_jobs_digest(replicas);
  const auto common_count = static_cast<std::size_t>(std::count_if(
      replicas.begin(), replicas.end(), [&](const ReplicaRecord& r) { return r.replica.jobs_digest == common; }));
  for (const auto& r : replicas) out << replica_text(r, at, common, common_count);
}

void print(const StoreView& store, const FleetView& fleet, Instant at, bool json, std::ostream& out) {
  if (json) {
    out << status_document(store.coordinator, at, store.leader, fleet) << '\n';
    return;
  }
  print_replicas(store, fleet.replicas, at, out);
  out << fmt::format("jobs ({}):\n", fleet.jobs.size());
  for (const auto& j : fleet.jobs) out << job_text(j);
}

/// More jobs than status_list_max: counts from the index, no ledger read.
void print_summary(const StoreView& store, const FleetIndex& index, Instant at, std::ostream& out) {
  print_replicas(store, index.replicas, at, out);
  std::size_t every_replica = 0, paused = 0, removed = 0, triggers = 0, uncatalogued = 0;
  for (const auto& job : index.jobs) {
    if (!job.catalogued) ++uncatalogued;
    if (job.catalogued && job.catalogued->every_replica) ++every_replica;
    if (job.catalogued && job.catalogued->removed) ++removed;
    if (job.control && job.control->paused) ++paused;
    if (job.control) triggers += job.control->triggers.size();
  }
  out << fmt::format("jobs ({}): more than {}, summarised (--all lists them, --prefix PREFIX those whose key starts "
                     "with it, --failing the failing ones)\n",
                     index.jobs.size(), status_list_max);
  out << fmt::format("  scope         {} fleet-wide, {} on every replica{}\n", index.jobs.size() - every_replica - uncatalogued,
                     every_replica, uncatalogued ? fmt::format(", {} with controls only (no replica runs them)", uncatalogued) : "");
  out << fmt::format("  paused        {}\n  removed       {}\n  triggers      {} waiting\n", paused, removed, triggers);
}

/// The jobs `query` lists, each with its next fire and ledger (one read
/// per job with the prefix; --failing keeps the failing ones).
FleetView listed_jobs(FleetState& state, FleetIndex&& index, Instant at, const StatusQuery& query) {
  FleetView view{std::move(index.replicas), {}};
  for (const auto& indexed : index.jobs) {
    if (!indexed.key.starts_with(query.prefix)) continue;
    JobView job = indexed.view();
    read_job_ledger(state, job);
    if (query.failing && !job_failing(job)) continue;
    find_next_fire(job, at);
    view.jobs.push_back(std::move(job));
  }
  return view;
}

}  // namespace

StoreView read_store_view(const Settings& settings, bool with_claims) {
  return backend_for(settings.coordinator).read_view(settings, with_claims);
}

int run_status_command(const Settings& settings, const StatusQuery& query, std::ostream& out, std::ostream& err) {
  const bool json = query.json;
  try {
    const Backend& backend = backend_for(settings.coordinator);
    if (backend.in_process()) {
      if (json) {
        out << status_document(std::string(backend.name()), now(), LeaderView{}, FleetView{}) << '\n';
      } else {
        out << "coordinator: " << backend.name() << " (it lives inside one fleetcron process; nothing to ask)\n";
      }
      return 0;
    }
    const StoreView store = read_store_view(settings, true);
    const Instant at = now();
    std::shared_ptr<FleetState> state;
    try {
      state = open_fleet_state(settings);
    } catch (const BackendError& e) {
      // A fleet that never kept a fleet state (--catch-up 0 --history 0):
      // a NATS bucket that does not exist (the others open lazily).
      print(store, FleetView{}, at, json, out);
      if (!json) out << "fleet state: none (" << terminal_safe(e.what()) << ")\n";
      return 0;
    }
    const Instant store_at = StoreClock(*state, system_clock()).now();  // the views' liveness on the store's clock
    FleetIndex index = read_fleet_index(*state, store_at);
    const std::string catalogue_error = index.catalogue_error;
    if (!json && !query.all && !query.failing && query.prefix.empty() && index.jobs.size() > status_list_max) {
      print_summary(store, index, store_at, out);
    } else {
      print(store, listed_jobs(*state, std::move(index), store_at, query), store_at, json, out);
    }
    if (!json && !catalogue_error.empty()) out << "catalogue: " << terminal_safe(catalogue_error) << '\n';
    return 0;
  } catch (const std::exception& e) {
    err << "status: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
