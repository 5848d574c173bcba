// The per-job metrics' text (job_metrics.h): what an alert reads.
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
