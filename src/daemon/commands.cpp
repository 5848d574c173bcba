#include "daemon/commands.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "daemon/coordination_setup.h"
#include "daemon/jobs_file.h"
#include "daemon/log_sink.h"
#include "fleetcron/duration.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/inspection.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::daemon {

// See commands.h.
// JSON-escaped (C0 controls, quotes,
// invalid UTF-8), and also the code points a terminal or an editor acts on
// — C1 controls (U+0080..U+009F, U+009B is CSI), line and paragraph
// separators, bidirectional overrides and isolates — as \uXXXX.
std::string terminal_safe(std::string_view text) {
  const std::string escaped = json_escape(text);
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const auto b0 = static_cast<unsigned char>(escaped[i]);
    const auto b1 = i + 1 < escaped.size() ? static_cast<unsigned char>(escaped[i + 1]) : 0;
    const auto b2 = i + 2 < escaped.size() ? static_cast<unsigned char>(escaped[i + 2]) : 0;
    if (b0 == 0xC2 && b1 >= 0x80 && b1 <= 0x9F) {
      out += fmt::format("\\u{:04x}", b1);
      ++i;
    } else if (b0 == 0xE2 && ((b1 == 0x80 && b2 >= 0xA8 && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9))) {
      out += fmt::format("\\u{:04x}", 0x2000 + ((b1 & 0x3F) << 6) + (b2 & 0x3F));
      i += 2;
    } else {
      out += escaped[i];
    }
  }
  return out;
}

namespace {



Instant now() {
  return Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())};
}

int redis_status(const Settings& settings, std::ostream& out) try {
  redis::Client client(redis_options(settings));
  const std::string leader_key = settings.leader_key.empty() ? std::string(redis::default_leader_key) : settings.leader_key;
  const redis::LeaseRecord lease = redis::read_lease(client, leader_key);
  out << "coordinator: " << client.describe() << '\n';
  // What the store holds is escaped: it cannot forge lines or send
  // terminal control sequences.
  if (lease.holder) {
    out << fmt::format("leader: \"{}\" (term {}, lease expires in {} ms)\n", terminal_safe(*lease.holder),
                       lease.term ? terminal_safe(*lease.term) : std::string("unknown"), lease.expires_in.count());
  } else {
    out << "leader: none\n";
  }
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
  out << fmt::format("claims in the last hour ({} job(s)):\n", per_job.size());
  for (const auto& [key, entry] : per_job) {
    out << fmt::format("  {}  {} claim(s), latest {}\n", terminal_safe(key), entry.first, terminal_safe(entry.second));
  }
  return 0;
} catch (const BackendError& e) {
  // The message carries the server's reply text (NOAUTH, NOPERM, …):
  // escaped, like everything else read from the store.
  throw std::runtime_error(terminal_safe(e.what()));
}

int nats_status(const Settings& given, std::ostream& out) {
  Settings settings = given;
  nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
  const std::string bucket = settings.leader_bucket;
  const std::string key = settings.leader_key.empty() ? std::string(nats::default_leader_key) : settings.leader_key;
  options.max_reconnects = 0;
  auto connection = nats::Connection::connect(options);
  out << "coordinator: " << connection->describe() << '\n';
  std::shared_ptr<nats::Bucket> leader_bucket;
  try {
    leader_bucket = connection->bucket(bucket);
  } catch (const BackendError&) {
    out << fmt::format("leader: none (no bucket {})\n", bucket);
    return 0;
  }
  out << describe_leader_record(leader_bucket->get(key));
  return 0;
}

}  // namespace

std::string describe_leader_record(const std::optional<nats::Entry>& entry) {
  if (!entry || entry->operation != nats::Entry::Operation::put || entry->value == nats::Election::resigned_marker) {
    return "leader: none\n";
  }
  // The term is the revision at which it won; the key only keeps its
  // latest renewal, so that is what can be shown here. The value is
  // whatever was written to the bucket: escaped, so it cannot forge lines
  // or send terminal control sequences.
  return fmt::format("leader: \"{}\" (last renewed at revision {})\n", terminal_safe(entry->value), entry->revision);
}

int run_validate_command(const Settings& settings, int count, std::ostream& out, std::ostream& err) {
  try {
    validate(settings);
    const JobsFile file = load_jobs_file(settings.jobs_file, jobs_parse_options(settings.seconds, settings.zone));
    // What `run` and a reload check, with the coordination settings given
    // (the claimer's dedup window and key limits), without connecting.
    SchedulerOptions scheduler_options;
    scheduler_options.claimer = make_offline_claimer(settings);
    const Scheduler rules(scheduler_options);
    for (const auto& job : file.jobs) {
      try {
        rules.check(job.schedule, entry_options(job));
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}:{}: {}", file.path, job.line, e.what()));
      }
    }
    const Instant from = now();
    out << fmt::format("{}: {} job(s)\n", file.path, file.jobs.size());
    for (const auto& job : file.jobs) {
      out << fmt::format("\n{}:{}  key {}{}\n  spec     {}\n  command  {}\n", file.path, job.line, job.key,
                         job.derived_key ? " (derived: editing the line changes it)" : "", job.spec, job.command);
      if (job.attempt_timeout.count() > 0 || job.jitter || job.retries > 0 || job.overlap != Overlap::skip || job.missed ||
          job.catch_up) {
        out << fmt::format("  options  timeout={} jitter={} retries={} overlap={}{}{}\n",
                           job.attempt_timeout.count() > 0 ? format_duration(job.attempt_timeout) : "none",
                           job.jitter ? format_duration(*job.jitter) : "none",
                           job.retries, to_string(job.overlap),
                           job.missed ? fmt::format(" missed={}", to_string(*job.missed)) : "",
                           job.catch_up ? fmt::format(" catch-up={}", format_duration(*job.catch_up)) : "");
      }
      const auto fires = next_n(*job.schedule, from, static_cast<std::size_t>(count));
      if (fires.empty()) out << "  next     none (never fires)\n";
      for (std::size_t i = 0; i < fires.size(); ++i) {
        out << (i == 0 ? "  next     " : "           ") << format_rfc3339(fires[i], job.schedule->zone()) << '\n';
      }
    }
    return 0;
  } catch (const std::exception& e) {
    err << e.what() << '\n';
    return 2;
  }
}

int run_status_command(const Settings& settings, std::ostream& out, std::ostream& err) {
  try {
    if (settings.coordinator == "memory") {
      out << "coordinator: memory (it lives inside one fleetcron process; nothing to ask)\n";
      return 0;
    }
    if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) return nats_status(settings, out);
    return redis_status(settings, out);
  } catch (const std::exception& e) {
    err << "status: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
