#include "daemon/cli/commands.h"

#include <fmt/format.h>

#include <chrono>

#include "daemon/run/coordination_setup.h"
#include "daemon/config/jobs_file.h"
#include "daemon/config/jobs_sources.h"
#include "daemon/observe/log_sink.h"
#include "fleetcron/duration.h"
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

void print_job(std::ostream& out, const JobDefinition& job, int count, Instant from) {
  out << fmt::format("\n{}:{}  key {}{}\n  spec     {}\n  command  {}\n", job.file, job.line, job.key,
                     job.derived_key ? " (derived: editing the line changes it)" : "", job.spec, job.command);
  if (job.input) out << fmt::format("  input    \"{}\" (standard input, from '%')\n", terminal_safe(*job.input));
  if (job.attempt_timeout.count() > 0 || job.jitter || job.retries > 0 || job.overlap != Overlap::skip || job.missed ||
      job.catch_up || job.recover != RecoverPolicy::report || job.pause_on_failure) {
    out << fmt::format("  options  timeout={} jitter={} retries={} overlap={}{}{}{}{}\n",
                       job.attempt_timeout.count() > 0 ? format_duration(job.attempt_timeout) : "none",
                       job.jitter ? format_duration(*job.jitter) : "none", job.retries, to_string(job.overlap),
                       job.missed ? fmt::format(" missed={}", to_string(*job.missed)) : "",
                       job.catch_up ? fmt::format(" catch-up={}", format_duration(*job.catch_up)) : "",
                       job.recover != RecoverPolicy::report ? " recover=rerun" : "",
                       job.pause_on_failure ? " pause-on-failure=yes" : "");
  }
  if (job.at_start) {
    out << "  scope    replica (@reboot: once when the daemon starts, on each replica, never claimed)\n";
  } else if (job.scope == JobScope::replica) {
    out << "  scope    replica (every replica runs each fire; never claimed or leader-gated)\n";
  }
  if (!job.working_directory.empty()) out << fmt::format("  dir      {}\n", job.working_directory);
  if (!job.env_file.empty()) out << fmt::format("  env-file {}\n", job.env_file);
  if (!job.user.empty()) {
    out << fmt::format("  user     {}{}\n", job.user,
                       job.run_as ? fmt::format(" (uid {}, gid {})", job.run_as->uid, job.run_as->gid) : " (the daemon's own)");
  }
  if (job.at_start) return;
  const auto fires = next_n(*job.schedule, from, static_cast<std::size_t>(count));
  if (fires.empty()) out << "  next     none (never fires)\n";
  for (std::size_t i = 0; i < fires.size(); ++i) {
    out << (i == 0 ? "  next     " : "           ") << format_rfc3339(fires[i], job.schedule->zone()) << '\n';
  }
}

}  // namespace

int run_validate_command(const Settings& settings, int count, std::ostream& out, std::ostream& err) {
  try {
    validate(settings);
    const JobsSources sources = load_jobs_sources(settings.jobs_paths, jobs_parse_options(settings.seconds, settings.zone),
                                                  settings.job_defaults, settings.crontab_format);
    // What `run` and a reload check, with the coordination settings given
    // (the claimer's dedup window and key limits), without connecting.
    SchedulerOptions scheduler_options;
    scheduler_options.claimer = make_offline_claimer(settings);
    const Scheduler rules(scheduler_options);
    for (const JobDefinition* job : sources.jobs()) {
      try {
        rules.check(job->schedule, entry_options(*job));
      } catch (const std::exception& e) {
        throw std::runtime_error(rule_error(*job, e.what()));
      }
    }
    for (const auto& file : sources.files) {
      out << fmt::format("{}: {} job(s){}\n", file.path, file.jobs.size(),
                         file.format == CrontabFormat::system ? " (system crontab: spec, user, command)" : "");
      for (const auto& notice : file.notices) out << fmt::format("{}:{}: note: {}\n", file.path, notice.line, notice.message);
      if (file.percent == PercentMode::literal) out << "'%' is literal in this file (fleetcron-file: percent=literal)\n";
    }
    for (const auto& skipped : sources.skipped) out << fmt::format("{}: skipped: {}\n", skipped.path, skipped.reason);
    if (sources.files.size() > 1) out << fmt::format("{} job(s) in {} files\n", sources.job_count(), sources.files.size());
    const Instant from = now();
    for (const JobDefinition* job : sources.jobs()) print_job(out, *job, count, from);
    return 0;
  } catch (const std::exception& e) {
    err << e.what() << '\n';
    return 2;
  }
}

}  // namespace fleetcron::daemon
