#include "daemon/observe/job_metrics.h"

#include <fmt/format.h>

#include <functional>

namespace fleetcron::daemon {

namespace {

double seconds_of(Instant at) { return std::chrono::duration<double>(at.time_since_epoch()).count(); }

/// One gauge: HELP, TYPE, and a line per job that has a value.
void gauge(std::string& out, const FleetView& view, const char* name, const char* help,
           const std::function<std::optional<double>(const JobView&)>& value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  for (const auto& job : view.jobs) {
    if (const auto v = value(job)) out += fmt::format("{}{{job=\"{}\"}} {}\n", name, label_value(job.key), *v);
  }
}

}  // namespace

std::string label_value(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

bool job_needs_attention(const JobView& job) { return job_failing(job) || (job.control && job.control->paused); }

std::string render_job_metrics(const FleetView& all_jobs, JobMetricsScope scope) {
  if (scope == JobMetricsScope::none) return {};
  FleetView kept;
  if (scope == JobMetricsScope::failing) {
    for (const auto& job : all_jobs.jobs) {
      if (job_needs_attention(job)) kept.jobs.push_back(job);
    }
  }
  const FleetView& view = scope == JobMetricsScope::failing ? kept : all_jobs;
  std::string out;
  gauge(out, view, "fleetcron_job_last_success_timestamp_seconds",
        "Scheduled instant of the job's newest successful run in the ledger (its newest 100 records).",
        [](const JobView& j) -> std::optional<double> {
          if (!j.last_success) return std::nullopt;
          return seconds_of(j.last_success->scheduled_at);
        });
  gauge(out, view, "fleetcron_job_last_run_timestamp_seconds",
        "Scheduled instant of the job's newest finished (or lost) run.",
        [](const JobView& j) -> std::optional<double> {
          if (!j.last_run) return std::nullopt;
          return seconds_of(j.last_run->scheduled_at);
        });
  out += "# HELP fleetcron_job_last_outcome 1 for the outcome of the job's newest finished (or lost) run, 0 for the "
         "others.\n"
         "# TYPE fleetcron_job_last_outcome gauge\n";
  for (const auto& job : view.jobs) {
    if (!job.last_run) continue;
    for (const FireFate fate :
         {FireFate::succeeded, FireFate::failed, FireFate::timed_out, FireFate::cancelled, FireFate::lost}) {
      out += fmt::format("fleetcron_job_last_outcome{{job=\"{}\",outcome=\"{}\"}} {}\n", label_value(job.key),
                         to_string(fate), job.last_run->fate == fate ? 1 : 0);
    }
  }
  gauge(out, view, "fleetcron_job_running", "Runs of the job in progress anywhere in the fleet, as the ledger says.",
        [](const JobView& j) { return static_cast<double>(j.running.size()); });
  gauge(out, view, "fleetcron_job_lost_fires", "Lost runs of the job among its newest 100 ledger records.",
        [](const JobView& j) { return static_cast<double>(j.lost); });
  gauge(out, view, "fleetcron_job_paused", "1 while the job is paused for the whole fleet.",
        [](const JobView& j) { return j.control && j.control->paused ? 1.0 : 0.0; });
  gauge(out, view, "fleetcron_job_next_fire_timestamp_seconds", "The job's next instant, from the job catalogue.",
        [](const JobView& j) -> std::optional<double> {
          if (!j.next_fire) return std::nullopt;
          return seconds_of(*j.next_fire);
        });
  gauge(out, view, "fleetcron_job_interval_seconds", "The gap between the job's next two instants.",
        [](const JobView& j) -> std::optional<double> {
          if (!j.interval) return std::nullopt;
          return std::chrono::duration<double>(*j.interval).count();
        });
  return out;
}

}  // namespace fleetcron::daemon
