// The daemon's record of fires: each metric and log line from an event.
#include "daemon/observe/fire_recorder.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fleetcron::daemon {
namespace {

std::string record(const Event& event) {
  Metrics metrics;
  std::ostringstream out;
  {
    LogSink log(LogFormat::text, out);
    FireRecorder recorder(metrics, log, [](const std::string&) { return std::string("true"); });
    recorder.on_event(event);
    EXPECT_TRUE(log.flush());
  }
  return out.str();
}

// Review finding: with the scheduler's own lines off, a not-leader skip
// that carried a reason (a term lost, a handover inside the jitter) was no
// longer logged anywhere, though no replica might run the fire.
TEST(FireRecorder, RoutineSkipsAreQuietButOnesWithAReasonAreLogged) {
  auto entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "job", "job"});
  SkippedFireEvent routine{entry, "job@2026-01-01T00:00:00Z", {}, SkipReason::not_leader, ""};
  EXPECT_EQ(record(routine), "");
  SkippedFireEvent explained = routine;
  explained.error = "leadership of term 3 was lost";
  const std::string line = record(explained);
  EXPECT_NE(line.find("fire-skipped"), std::string::npos) << line;
  EXPECT_NE(line.find("not-leader: leadership of term 3 was lost"), std::string::npos) << line;
  SkippedFireEvent taken{entry, "job@2026-01-01T00:00:00Z", {}, SkipReason::already_claimed, ""};
  EXPECT_EQ(record(taken), "");
}

TEST(FireRecorder, ARunIsCountedOnceHoweverManyAttempts) {
  auto entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "job", "job"});
  Metrics metrics;
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  FireRecorder recorder(metrics, log, [](const std::string&) { return std::string("exit 1"); });
  const Instant at{};
  recorder.on_event(JobStartedEvent{entry, "job@x", at, at, 1, 7, false});
  recorder.on_event(JobAttemptFailedEvent{entry, "job@x", at, 1, RunStatus::failed, "exit 1", std::chrono::seconds{1}});
  recorder.on_event(JobStartedEvent{entry, "job@x", at, at, 2, 7, false});
  recorder.on_event(JobCompletedEvent{entry, "job@x", at, std::chrono::seconds{3}, RunStatus::failed, 2, "exit 1", false});
  const std::string metrics_text = metrics.render();
  EXPECT_NE(metrics_text.find("fleetcron_fires_total 1\n"), std::string::npos);
  EXPECT_NE(metrics_text.find("fleetcron_retries_total 1\n"), std::string::npos);
  EXPECT_NE(metrics_text.find("fleetcron_runs_total{outcome=\"failed\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics_text.find("fleetcron_running_jobs 0\n"), std::string::npos);
  ASSERT_TRUE(log.flush());
  EXPECT_NE(out.str().find("run-finished job=job fire=job@x failed: exit 1 in 3s after 2 attempts"), std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace fleetcron::daemon
