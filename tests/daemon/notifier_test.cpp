// Notifications from the scheduler's events, with real commands: what each
// event sends and with which variables, retries, a full queue, a stop.
// (Webhooks and pings against a real HTTP receiver: tests/e2e/notify_test.sh.)
#include "daemon/observe/notifier.h"
#include "daemon/observe/url_redaction.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fleetcron/rfc3339.h"
#include "support/scratch_directory.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

/// A scratch directory; `dir` as the tests here name it.
struct Scratch : test::ScratchDirectory {
  const std::string& dir = path();
};

NotifiedJob job(const JobNotifications& notifications) {
  NotifiedJob out;
  out.notifications = notifications;
  out.command.environment = {"PATH=/usr/bin:/bin", "GREETING=hi"};
  return out;
}

std::string metrics_line(const Metrics& metrics, std::string_view labels) {
  const std::string text = metrics.render();
  const std::string wanted = "fleetcron_notifications_total{" + std::string(labels) + "} ";
  const auto at = text.find(wanted);
  return at == std::string::npos ? "absent" : text.substr(at + wanted.size(), text.find('\n', at) - at - wanted.size());
}

TEST(Notifier, FailureLostAndMissedRunTheirCommandsWithTheFiresVariables) {
  const Scratch s;
  Metrics metrics;
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  {
    Notifier notifier(metrics, log, "replica-a", NotifierOptions{.first_backoff = 10ms});
    const std::string write = " >> " + s.dir + "/notes";
    notifier.set_jobs({{"backup", job({.on_failure = "echo \"$FLEETCRON_OUTCOME $FLEETCRON_FIRE_KEY $FLEETCRON_EXIT_STATUS "
                                                     "$FLEETCRON_ATTEMPTS $GREETING $FLEETCRON_OUTPUT_TAIL\"" + write,
                                       .on_lost = "echo \"$FLEETCRON_OUTCOME $FLEETCRON_FIRE_KEY $FLEETCRON_LOST_REPLICA\"" + write,
                                       .on_missed = "echo \"$FLEETCRON_OUTCOME $FLEETCRON_MISSED_COUNT $FLEETCRON_LAST_MISSED\"" + write,
                                       .notify = "", .ping = ""})}});
    auto entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "backup", "backup"});
    const Instant at = parse_rfc3339("2026-12-03T03:00:00Z");
    JobCompletedEvent failed{entry, "backup@2026-12-03T03:00:00Z", at, 2s, RunStatus::failed, 2, "exit 3", false, at, 7, {}};
    failed.details.exit_status = 3;
    failed.details.output_tail = "disk full";
    notifier.on_event(failed);
    JobCompletedEvent fine = failed;
    fine.status = RunStatus::succeeded;
    notifier.on_event(fine);  // no command for a success
    LostFireEvent lost;
    lost.job_key = "backup";
    lost.fire_key = "backup@2026-12-03T04:00:00Z";
    lost.replica_id = "replica-b";
    notifier.on_event(lost);
    MissedFireEvent missed;
    missed.entry = entry;
    missed.first_missed = at;
    missed.last_missed = parse_rfc3339("2026-12-03T05:00:00Z");
    missed.missed = 3;
    notifier.on_event(missed);
    auto other = std::make_shared<EntryIdentity>(EntryIdentity{2, "quiet", "quiet"});
    notifier.on_event(JobCompletedEvent{other, "quiet@x", at, 1s, RunStatus::failed, 1, "exit 1", false, at, 1, {}});
    notifier.stop(std::chrono::steady_clock::now() + 10s);
  }
  EXPECT_EQ(s.read("notes"),
            "failed backup@2026-12-03T03:00:00Z 3 2 hi disk full\n"
            "lost backup@2026-12-03T04:00:00Z replica-b\n"
            "missed 3 2026-12-03T05:00:00Z\n");
  EXPECT_EQ(metrics_line(metrics, R"(kind="command",result="delivered")"), "3");
}

TEST(Notifier, AFleetJobsMissesAreNotifiedFromCatchUpOnlyNotFromOneReplicasLateLoop) {
  const Scratch s;
  Metrics metrics;
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  {
    Notifier notifier(metrics, log, "replica-a");
    NotifiedJob fleet = job({.on_failure = "", .on_lost = "", .on_missed = "echo \"$FLEETCRON_MISSED_COUNT\" >> " + s.dir + "/notes",
                             .notify = "", .ping = ""});
    fleet.fleet_scoped = true;
    notifier.set_jobs({{"nightly", fleet}});
    MissedFireEvent late;
    late.entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "nightly", "nightly"});
    late.first_missed = late.last_missed = parse_rfc3339("2026-12-03T03:00:00Z");
    late.missed = 1;
    notifier.on_event(late);  // this replica was late; another likely ran it
    MissedFireEvent caught_up = late;
    caught_up.catch_up = true;
    caught_up.missed = 2;
    notifier.on_event(caught_up);  // the whole fleet was down: one replica reports it
    notifier.stop(std::chrono::steady_clock::now() + 10s);
  }
  EXPECT_EQ(s.read("notes"), "2\n");
}

// A queue of none would drop every notification: refused, naming the field.
TEST(Notifier, OptionsOutOfRangeAreRefusedNamingTheField) {
  Metrics metrics;
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  try {
    Notifier notifier(metrics, log, "r", NotifierOptions{.max_queued = 0});
    FAIL() << "max_queued 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "notifier option max_queued: 0 is not between 1 and 100000");
  }
  EXPECT_THROW(Notifier(metrics, log, "r", NotifierOptions{.attempts = 0}), std::invalid_argument);
  EXPECT_NO_THROW(Notifier(metrics, log, "r", NotifierOptions{.max_queued = 1}));
}

TEST(UrlRedaction, KeepsSchemeHostAndPortOnly) {
  EXPECT_EQ(redact_url("https://user:pw@hooks.example:8443/T0/B1/xyz?token=t"), "https://hooks.example:8443/…");
  EXPECT_EQ(redact_url("https://hc-ping.com/0f3a-uuid"), "https://hc-ping.com/…");
  EXPECT_EQ(redact_url("http://127.0.0.1:9/?k=v"), "http://127.0.0.1:9/…");
  EXPECT_EQ(redact_url("http://host.example/"), "http://host.example");
  EXPECT_EQ(redact_url("http://host.example"), "http://host.example");
  EXPECT_EQ(redact_url("http://a@b@host.example/x"), "http://host.example/…");
  EXPECT_EQ(redact_url("hooks.example/secret"), "(not a URL)");
}

TEST(Notifier, AFailingDeliveryIsRetriedThenCountedAndLogged) {
  const Scratch s;
  Metrics metrics;
  std::ostringstream out;
  {
    LogSink log(LogFormat::text, out);
    Notifier notifier(metrics, log, "replica-a", NotifierOptions{.attempts = 3, .first_backoff = 10ms});
    notifier.set_jobs({{"j", job({.on_failure = "echo try >> " + s.dir + "/tries; exit 1", .on_lost = "", .on_missed = "",
                                  .notify = "http://user:pw@127.0.0.1:1/hook/s3cr3t?token=t0k3n", .ping = ""})}});
    auto entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "j", "j"});
    notifier.on_event(JobCompletedEvent{entry, "j@x", {}, 1s, RunStatus::timed_out, 1, "timeout", false, {}, 1, {}});
    notifier.stop(std::chrono::steady_clock::now() + 10s);
    EXPECT_TRUE(log.flush());
  }
  EXPECT_EQ(s.read("tries"), "try\ntry\ntry\n");  // three attempts
  EXPECT_EQ(metrics_line(metrics, R"(kind="command",result="failed")"), "1");
  EXPECT_EQ(metrics_line(metrics, R"(kind="webhook",result="failed")"), "1");
  EXPECT_NE(out.str().find("notify-failed"), std::string::npos) << out.str();
  // The URL's secrets (user part, path, query) stay out of the log.
  EXPECT_NE(out.str().find("webhook http://127.0.0.1:1/…:"), std::string::npos) << out.str();
  for (const char* secret : {"pw@", "s3cr3t", "t0k3n"}) EXPECT_EQ(out.str().find(secret), std::string::npos) << secret;
}

TEST(Notifier, AFullQueueDropsAndCountsAndAStopDropsWhatIsLeft) {
  Metrics metrics;
  std::ostringstream out;
  {
    LogSink log(LogFormat::text, out);
    Notifier notifier(metrics, log, "replica-a", NotifierOptions{.max_queued = 2});
    notifier.set_jobs({{"j", job({.on_failure = "sleep 5", .on_lost = "", .on_missed = "", .notify = "", .ping = ""})}});
    auto entry = std::make_shared<EntryIdentity>(EntryIdentity{1, "j", "j"});
    for (int i = 0; i < 6; ++i) {
      notifier.on_event(JobCompletedEvent{entry, "j@" + std::to_string(i), {}, 1s, RunStatus::failed, 1, "", false, {}, 1, {}});
    }
    const auto started = std::chrono::steady_clock::now();
    notifier.stop(started + 200ms);  // the sleep in flight is ended, the queued ones dropped
    // Well short of the 5 s sleep, far above a busy host's lateness.
    EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
    EXPECT_TRUE(log.flush());
  }
  // One in flight, two queued, three refused by the full queue (at least).
  EXPECT_EQ(metrics_line(metrics, R"(kind="command",result="dropped")"), "5");
  EXPECT_NE(out.str().find("already wait (the limit)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("not sent: the daemon stopped"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace fleetcron::daemon
