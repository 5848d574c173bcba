// The per-job metrics' text (job_metrics.h): what an alert reads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/observe/job_metrics.h"
#include "support/time.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

FireRecord run(std::string job, FireFate fate, Instant at) {
  FireRecord record;
  record.job_key = job;
  record.fire_key = job + "@x";
  record.scheduled_at = at;
  record.fate = fate;
  record.started_at = at;
  return record;
}

// --job-metrics failing: only the jobs to act on; none: nothing at all.
TEST(JobMetrics, FailingKeepsTheJobsToActOnAndNoneRendersNothing) {
  const Instant at = test::at("2026-12-01T03:00:00Z");
  FleetView view;
  const auto job = [&](std::string key, std::optional<FireFate> last, std::size_t lost, bool paused) {
    JobView j;
    j.key = std::move(key);
    if (last) j.last_run = run(j.key, *last, at);
    j.lost = lost;
    if (paused) j.control = JobControl{.job_key = j.key, .paused = true};
    return j;
  };
  view.jobs = {job("ok", FireFate::succeeded, 0, false), job("failed", FireFate::failed, 0, false),
               job("timed-out", FireFate::timed_out, 0, false), job("lost", FireFate::lost, 0, false),
               job("lost-before", FireFate::succeeded, 1, false), job("paused", std::nullopt, 0, true),
               job("fresh", std::nullopt, 0, false)};
  const std::string failing = render_job_metrics(view, JobMetricsScope::failing);
  for (const char* kept : {"failed", "timed-out", "lost", "lost-before", "paused"}) {
    EXPECT_NE(failing.find(fmt::format("fleetcron_job_paused{{job=\"{}\"}}", kept)), std::string::npos) << kept;
  }
  for (const char* dropped : {"ok", "fresh"}) {
    EXPECT_EQ(failing.find(fmt::format("job=\"{}\"", dropped)), std::string::npos) << dropped;
  }
  EXPECT_LT(failing.size(), render_job_metrics(view).size());
  EXPECT_EQ(render_job_metrics(view, JobMetricsScope::none), "");
}

TEST(JobMetrics, EachJobHasItsSeriesWithEscapedLabels) {
  const Instant at = test::at("2026-12-01T03:00:00Z");
  FleetView view;
  JobView nightly;
  nightly.key = "nightly \"report\"\\";
  nightly.last_run = run(nightly.key, FireFate::failed, at);
  nightly.last_success = run(nightly.key, FireFate::succeeded, at - 24h);
  nightly.running.push_back(run(nightly.key, FireFate::running, at + 1h));
  nightly.lost = 2;
  nightly.next_fire = at + 24h;
  nightly.interval = 24h;
  nightly.control = JobControl{.job_key = nightly.key, .paused = true};
  JobView fresh;
  fresh.key = "fresh";  // nothing in the ledger yet
  view.jobs = {nightly, fresh};
  const std::string text = render_job_metrics(view);
  const std::string label = "job=\"nightly \\\"report\\\"\\\\\"";
  for (const std::string& line : {
           "fleetcron_job_last_success_timestamp_seconds{" + label + "} 1796007600",
           "fleetcron_job_last_run_timestamp_seconds{" + label + "} 1796094000",
           "fleetcron_job_last_outcome{" + label + ",outcome=\"failed\"} 1",
           "fleetcron_job_last_outcome{" + label + ",outcome=\"succeeded\"} 0",
           "fleetcron_job_running{" + label + "} 1",
           "fleetcron_job_lost_fires{" + label + "} 2",
           "fleetcron_job_paused{" + label + "} 1",
           std::string("fleetcron_job_paused{job=\"fresh\"} 0"),
           "fleetcron_job_interval_seconds{" + label + "} 86400",
       }) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\nin:\n" << text;
  }
  EXPECT_EQ(text.find("fleetcron_job_last_success_timestamp_seconds{job=\"fresh\"}"), std::string::npos)
      << "no value, no series";
  EXPECT_EQ(label_value("a\nb"), "a\\nb");
}

}  // namespace
}  // namespace fleetcron::daemon
