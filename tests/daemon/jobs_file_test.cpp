// The jobs file: syntax, directives, keys, and errors with file:line:column.
#include <gtest/gtest.h>

#include "daemon/jobs_file.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

JobsFile parse(std::string_view text, SecondsField seconds = SecondsField::none) {
  ParseOptions options;
  options.seconds = seconds;
  return parse_jobs_file(text, "jobs.cron", options);
}

std::string error_of(std::string_view text, SecondsField seconds = SecondsField::none) {
  try {
    (void)parse(text, seconds);
  } catch (const JobsFileError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JobsFile, JobsEnvironmentZonesAndDirectives) {
  const auto file = parse(R"(# nightly things
SHELL=/bin/bash
GREETING = "hello world"
*/5 * * * *   echo $GREETING >> /tmp/out

CRON_TZ=America/New_York
# fleetcron: key=nightly-backup timeout=30m jitter=10s retries=3 overlap=queue missed=run-all dst-gap=skip
30 2 * * *  /usr/local/bin/backup --full
@every 90s  date
@daily  true
)");
  ASSERT_EQ(file.jobs.size(), 4u);
  const JobDefinition& first = file.jobs[0];
  EXPECT_EQ(first.spec, "*/5 * * * *");
  EXPECT_EQ(first.command, "echo $GREETING >> /tmp/out");
  EXPECT_EQ(first.line, 4);
  EXPECT_TRUE(first.derived_key);
  EXPECT_EQ(first.key, derive_key("*/5 * * * *", "echo $GREETING >> /tmp/out"));
  EXPECT_EQ(first.key.substr(0, 4), "job-");
  EXPECT_EQ(first.overlap, Overlap::skip);
  ASSERT_EQ(first.environment.size(), 2u);
  EXPECT_EQ(first.environment[1], (std::pair<std::string, std::string>{"GREETING", "hello world"}));

  const JobDefinition& backup = file.jobs[1];
  EXPECT_EQ(backup.key, "nightly-backup");
  EXPECT_FALSE(backup.derived_key);
  EXPECT_EQ(backup.spec, "TZ=America/New_York 30 2 * * *");
  EXPECT_EQ(backup.attempt_timeout, 30min);
  EXPECT_EQ(backup.jitter, 10s);
  EXPECT_EQ(backup.retries, 3);
  EXPECT_EQ(backup.overlap, Overlap::queue);
  EXPECT_EQ(backup.missed, MissedFirePolicy::run_all);
  ASSERT_TRUE(backup.dst);
  EXPECT_EQ(backup.dst->gap, DstGap::skip);
  // 02:30 does not exist in New York on 2026-03-08: skipped by dst-gap=skip.
  EXPECT_EQ(format_rfc3339(*backup.schedule->next(parse_rfc3339("2026-03-07T12:00:00Z"))), "2026-03-09T06:30:00Z");
  EXPECT_EQ(file.jobs[2].spec, "@every 90s");  // an interval has no zone
  EXPECT_EQ(file.jobs[3].command, "true");
}

TEST(JobsFile, SecondsFieldWhenEnabled) {
  const auto file = parse("*/10 * * * * *  echo tick\n", SecondsField::required);
  ASSERT_EQ(file.jobs.size(), 1u);
  EXPECT_EQ(file.jobs[0].spec, "*/10 * * * * *");
  EXPECT_EQ(file.jobs[0].command, "echo tick");
  // Without --seconds the sixth token is the command's first word.
  EXPECT_EQ(parse("*/10 * * * * echo tick\n").jobs[0].command, "echo tick");
}

TEST(JobsFile, KeysAreStableAndEditingALineChangesItsKey) {
  const auto a = parse("0 * * * * echo a\n");
  const auto b = parse("# another file, same line\n\n0 * * * * echo a\n");
  EXPECT_EQ(a.jobs[0].key, b.jobs[0].key);  // identical files on all replicas: identical keys
  EXPECT_NE(a.jobs[0].key, parse("0 * * * * echo b\n").jobs[0].key);
  EXPECT_NE(a.jobs[0].key, parse("1 * * * * echo a\n").jobs[0].key);
}

TEST(JobsFile, ErrorsNameFileLineAndColumn) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"61 * * * * echo\n", "jobs.cron:1:1: field minute: 61 above maximum 59"},
      {"0 25 * * * echo\n", "jobs.cron:1:3: field hour: 25 above maximum 23"},
      {"  0 0 * *\n", "jobs.cron:1:10: expected 5 spec fields then a command, found 4 field(s) and no command"},
      {"0 0 * * *\n", "jobs.cron:1:10: missing command after the spec"},
      {"@hourly\n", "jobs.cron:1:8: missing command after the spec"},
      {"@every 0s echo\n", "jobs.cron:1:8: field @every: interval 0s below minimum 1ms"},
      {"@reboot echo\n", "jobs.cron:1:1: field descriptor:"},
      {"# fleetcron: timeout=soon\n0 * * * * x\n", "jobs.cron:1:22: timeout:"},
      {"# fleetcron: colour=red\n0 * * * * x\n", "jobs.cron:1:14: unknown directive option \"colour\""},
      {"# fleetcron: overlap=sometimes\n0 * * * * x\n", "jobs.cron:1:22: overlap: expected skip, allow or queue"},
      {"# fleetcron: retries=-1\n0 * * * * x\n", "jobs.cron:1:22: retries: expected 0..100"},
      {"# fleetcron: key=a key=b\n0 * * * * x\n", "jobs.cron:1:20: key given twice"},
      {"# fleetcron: key=k\n\n0 * * * * x\n", "jobs.cron:2:1: the fleetcron directive on line 1 must be followed by a job line"},
      {"# fleetcron: key=k", "jobs.cron:1:1: the fleetcron directive must be followed by a job line"},
      {"# fleetcron: key=a@b\n0 * * * * x\n", "jobs.cron:1:1: key \"a@b\": at most 1024 bytes, without '@'"},
      {"0 * * * * x\n0 * * * * x\n", "jobs.cron:2:1: key \"job-"},
      {"# fleetcron: key=k\n0 * * * * x\n# fleetcron: key=k\n1 * * * * y\n", "jobs.cron:4:1: key \"k\" is already used by the job on line 2"},
      {"CRON_TZ=Mars/Olympus\n", "jobs.cron:1:9: unknown time zone \"Mars/Olympus\""},
      {"TZ=Europe/Berlin 0 9 * * * x\n", "jobs.cron:1:4: TZ takes one zone name"},
      {"NAME=\"unterminated\n", "jobs.cron:1:6: unterminated quoted value"},
      {"# fleetcron: catch-up=400d\n0 * * * * x\n", "jobs.cron:1:23: catch-up: is above the maximum of 366 days"},
      {"# fleetcron: catch-up=later\n0 * * * * x\n", "jobs.cron:1:23: catch-up: duration"},
      {"# fleetcron: recover=maybe\n0 * * * * x\n", "jobs.cron:1:22: recover: expected report or rerun, got \"maybe\""},
      {"# fleetcron: recover=rerun recover=report\n0 * * * * x\n", "jobs.cron:1:28: recover given twice"},
      {"0 0 30 feb * x\n0 0 * * * y\n", "(no error)"},  // never fires: accepted (validate shows it)
  };
  for (const auto& c : cases) {
    const std::string error = error_of(c.text);
    EXPECT_EQ(error.find(c.error), 0u) << c.text << "\n  got: " << error;
  }
}

TEST(JobsFile, CatchUpReachesAsTheDirectiveSays) {
  const auto file = parse("# fleetcron: key=a catch-up=2d\n0 3 * * * x\n# fleetcron: key=b catch-up=0\n0 4 * * * y\n0 5 * * * z\n");
  ASSERT_EQ(file.jobs.size(), 3U);
  EXPECT_EQ(file.jobs[0].catch_up, std::chrono::hours{48});
  EXPECT_EQ(file.jobs[1].catch_up, std::chrono::nanoseconds::zero());
  EXPECT_FALSE(file.jobs[2].catch_up.has_value());  // the daemon's --catch-up
  EXPECT_EQ(entry_options(file.jobs[0]).catch_up_reach, std::chrono::hours{48});
  auto changed = file.jobs[0];
  changed.catch_up = std::chrono::hours{1};
  EXPECT_FALSE(changed.same_definition(file.jobs[0]));  // a reload re-adds it
}

TEST(JobsFile, RecoverIsReportUnlessTheDirectiveSaysRerun) {
  const auto file = parse("# fleetcron: key=a recover=rerun\n0 3 * * * x\n0 4 * * * y\n");
  ASSERT_EQ(file.jobs.size(), 2U);
  EXPECT_EQ(file.jobs[0].recover, RecoverPolicy::rerun);
  EXPECT_EQ(entry_options(file.jobs[0]).recover, RecoverPolicy::rerun);
  EXPECT_EQ(entry_options(file.jobs[1]).recover, RecoverPolicy::report);
  auto changed = file.jobs[0];
  changed.recover = RecoverPolicy::report;
  EXPECT_FALSE(changed.same_definition(file.jobs[0]));  // a reload re-adds it
}

TEST(JobsFile, MissingFileAndLimits) {
  try {
    (void)load_jobs_file("/nonexistent/jobs.cron", {});
    FAIL();
  } catch (const JobsFileError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/jobs.cron: cannot read: No such file or directory");
  }
  EXPECT_EQ(error_of(std::string(max_line_bytes + 1, '#')).find("jobs.cron:1:1: line longer than"), 0u);
}

}  // namespace
}  // namespace fleetcron::daemon
