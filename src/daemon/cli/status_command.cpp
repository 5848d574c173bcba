// `fleetcron status`: the leader, recent claims (Redis), and from the
// fleet state the replicas and each job's next fire, last run, last
// success, runs in progress and controls. Reads only; runs nothing.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "daemon/cli/commands.h"
#include "daemon/run/coordination_setup.h"
#include "daemon/observe/fleet_view.h"
#include "daemon/observe/json_output.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/postgres/elector.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/inspection.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/store_clock.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::daemon {

namespace {

Instant now() {
  return Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())};
}

StoreView redis_view(const Settings& settings, bool with_claims) try {
  redis::Client client(redis_options(settings));
  StoreView view{client.describe(), {}, {}};
  const std::string leader_key = settings.leader_key.empty() ? std::string(redis::default_leader_key) : settings.leader_key;
  const redis::LeaseRecord lease = redis::read_lease(client, leader_key);
  // What the store holds is escaped: it cannot forge lines or send
  // terminal control sequences.
  if (lease.holder) {
    view.leader = {lease.holder, lease.term, lease.expires_in.count(), std::nullopt};
    view.text = fmt::format("leader: \"{}\" (term {}, lease expires in {} ms)\n", terminal_safe(*lease.holder),
                            lease.term ? terminal_safe(*lease.term) : std::string("unknown"), lease.expires_in.count());
  } else {
    view.text = "leader: none\n";
  }
  if (!with_claims) return view;
  // Claims: prefix + key@RFC3339; count those of the last hour per job.
  const Instant cutoff = now() - std::chrono::hours{1};
  std::map<std::string, std::pair<std::size_t, std::string>> per_job;  // key -> (count, latest)
  redis::scan_claims(client, settings.claim_prefix, [&](std::string_view fire_key) {
    const auto at = fire_key.rfind('@');
    Instant scheduled{};
    try {
      scheduled = parse_rfc3339(fire_key.substr(at + 1));
    } catch (const std::exception&) {
      return;
    }
    if (scheduled < cutoff) return;
    auto& [count, latest] = per_job[std::string(fire_key.substr(0, at))];
    ++count;
    latest = std::max(latest, std::string(fire_key.substr(at + 1)));
  });
  view.text += fmt::format("claims in the last hour ({} job(s)):\n", per_job.size());
  for (const auto& [key, entry] : per_job) {
    view.text += fmt::format("  {}  {} claim(s), latest {}\n", terminal_safe(key), entry.first, terminal_safe(entry.second));
  }
  return view;
} catch (const BackendError& e) {
  // The message carries the server's reply text (NOAUTH, NOPERM, …):
  // escaped, like everything else read from the store.
  throw std::runtime_error(terminal_safe(e.what()));
}

StoreView nats_view(const Settings& given) {
  Settings settings = given;
  nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
  const std::string key = settings.leader_key.empty() ? std::string(nats::default_leader_key) : settings.leader_key;
  options.max_reconnects = 0;
  auto connection = nats::Connection::connect(options);
  StoreView view{connection->describe(), {}, {}};
  std::shared_ptr<nats::Bucket> leader_bucket;
  try {
    leader_bucket = connection->bucket(settings.leader_bucket);
  } catch (const BackendError&) {
    view.text = fmt::format("leader: none (no bucket {})\n", settings.leader_bucket);
    return view;
  }
  const auto entry = leader_bucket->get(key);
  view.text = describe_leader_record(entry);
  if (entry && entry->operation == nats::Entry::Operation::put && entry->value != nats::Election::resigned_marker) {
    view.leader = {entry->value, std::nullopt, std::nullopt, entry->revision};
  }
  return view;
}

StoreView postgres_view(const Settings& settings) try {
  const postgres::UriOptions options = postgres_options(settings);
  postgres::Connection connection(options.connection);
  StoreView view{connection.describe(), {}, {}};
  const std::string name = options.leader_name.value_or(std::string(postgres::default_leader_name));
  const auto row = postgres::read_leader(connection, options.tables, name);
  if (!row) {
    view.text = "leader: none\n";
    return view;
  }
  view.leader = {row->holder, std::to_string(row->term), row->expires_in.count(), std::nullopt};
  view.text = fmt::format("leader: \"{}\" (term {}, lease expires in {} ms)\n", terminal_safe(row->holder), row->term,
                          row->expires_in.count());
  return view;
} catch (const BackendError& e) {
  throw std::runtime_error(terminal_safe(e.what()));
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

void print(const StoreView& store, const FleetView& fleet, Instant at, bool json, std::ostream& out) {
  if (json) {
    out << status_document(store.coordinator, at, store.leader, fleet) << '\n';
    return;
  }
  out << "coordinator: " << store.coordinator << '\n' << store.text;
  out << fmt::format("replicas ({}):\n", fleet.replicas.size());
  const std::string common = common_jobs_digest(fleet.replicas);
  const auto common_count = static_cast<std::size_t>(std::count_if(
      fleet.replicas.begin(), fleet.replicas.end(), [&](const ReplicaRecord& r) { return r.replica.jobs_digest == common; }));
  for (const auto& r : fleet.replicas) out << replica_text(r, at, common, common_count);
  out << fmt::format("jobs ({}):\n", fleet.jobs.size());
  for (const auto& j : fleet.jobs) out << job_text(j);
}

}  // namespace

StoreView read_store_view(const Settings& settings, bool with_claims) {
  const bool nats = settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://");
  if (postgres::is_postgres_uri(settings.coordinator)) return postgres_view(settings);
  return nats ? nats_view(settings) : redis_view(settings, with_claims);
}

int run_status_command(const Settings& settings, bool json, std::ostream& out, std::ostream& err) {
  try {
    if (settings.coordinator == "memory") {
      if (json) {
        out << status_document("memory", now(), LeaderView{}, FleetView{}) << '\n';
      } else {
        out << "coordinator: memory (it lives inside one fleetcron process; nothing to ask)\n";
      }
      return 0;
    }
    const bool nats = settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://");
    const StoreView store = read_store_view(settings, true);
    const Instant at = now();
    std::shared_ptr<FleetState> state;
    try {
      state = open_fleet_state(settings);
    } catch (const BackendError& e) {
      if (!nats) throw;
      // A fleet that never kept a fleet state (--catch-up 0 --history 0).
      print(store, FleetView{}, at, json, out);
      if (!json) out << "fleet state: none (" << terminal_safe(e.what()) << ")\n";
      return 0;
    }
    const Instant store_at = StoreClock(*state, system_clock()).now();  // the views' liveness on the store's clock
    print(store, read_fleet_view(*state, store_at), store_at, json, out);
    return 0;
  } catch (const std::exception& e) {
    err << "status: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
