// The jobs file: syntax, directives, keys, and errors with file:line:column.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/config/jobs_file.h"
#include "support/scratch_directory.h"
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
# fleetcron: key=nightly-backup timeout=30m jitter=10s retries=3 overlap=queue missed=run-all dst-gap=skip history=500 keep-succeeded=0 keep-failed=50
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
  EXPECT_EQ(backup.history, 500u);
  EXPECT_EQ(backup.keep_succeeded, 0u);
  EXPECT_EQ(backup.keep_failed, 50u);
  EXPECT_FALSE(first.history.has_value());
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

// A line of another field count never runs a command nobody wrote:
// supercronic's 7 fields without --seconds, seconds without --seconds,
// 5 fields under --seconds.
TEST(JobsFile, ALineWithAnotherFieldCountIsRefusedNamingTheOption) {
  EXPECT_EQ(error_of("*/5 * * * * * * echo hi\n"),
            "jobs.cron:1:13: \"*\" reads as one more cron field, but this file's lines have 5 fields (minute hour day "
            "month weekday), and a year 6th when it names one (2027, 2027-2030): the command would start with it. A "
            "line with seconds first needs --seconds (seconds = true in the config). A command that starts so needs "
            "its path");
  EXPECT_NE(error_of("0 0 * * * 5 echo\n").find("1:11: \"5\" reads as one more cron field"), std::string::npos);
  EXPECT_NE(error_of("0 0 * * * mon-fri/2 echo\n").find("\"mon-fri/2\" reads as one more"), std::string::npos);
  EXPECT_NE(error_of("0 0 * * * 1,15W echo\n").find("\"1,15W\" reads as one more"), std::string::npos);
  EXPECT_NE(error_of("0 0 1 1 * 2027 * echo\n").find("1:16: \"*\" reads as one more"), std::string::npos);
  EXPECT_NE(error_of("*/5 * * * * * * * echo\n", SecondsField::required).find("1:17: \"*\" reads as one more cron "
                                                                            "field, but this file's lines have 6 fields"),
            std::string::npos);
  EXPECT_EQ(error_of("0 9 * * mon-fri /usr/bin/report\n", SecondsField::required),
            "jobs.cron:1:17: this line has 5 fields, but --seconds (seconds = true) reads 6, seconds first: write "
            "\"0 0 9 * * mon-fri …\", or drop --seconds");
  EXPECT_EQ(error_of("0 0 1 1 * 1969 echo\n"), "jobs.cron:1:11: field year: 1969 below minimum 1970");
  // Words that are no cron field stay commands.
  for (const char* line : {"0 0 * * * echo\n", "0 0 * * * 7z a x.7z dir\n", "0 0 * * * sun-tool\n", "0 0 * * * ./5\n",
                           "0 0 * * * L2 run\n"}) {
    EXPECT_EQ(error_of(line), "(no error)") << line;
  }
}

// supercronic's and cronexpr's year field: 6th without --seconds when it
// names a year, 7th with --seconds.
TEST(JobsFile, AYearFieldComesLast) {
  const auto file = parse("0 0 1 1 * 2027 echo new year\n0 12 * * mon-fri 2027-2030/2,2035 /usr/bin/report\n");
  ASSERT_EQ(file.jobs.size(), 2u);
  EXPECT_EQ(file.jobs[0].spec, "0 0 1 1 * 2027");
  EXPECT_EQ(file.jobs[0].command, "echo new year");
  EXPECT_EQ(file.jobs[1].spec, "0 12 * * mon-fri 2027-2030/2,2035");
  EXPECT_EQ(file.jobs[1].command, "/usr/bin/report");
  const auto supercronic = parse("*/5 * * * * * * echo tick\n0 0 0 1 1 * 2027 echo once\n", SecondsField::required);
  ASSERT_EQ(supercronic.jobs.size(), 2u);
  EXPECT_EQ(supercronic.jobs[0].spec, "*/5 * * * * * *");
  EXPECT_EQ(supercronic.jobs[0].command, "echo tick");
  EXPECT_EQ(supercronic.jobs[1].spec, "0 0 0 1 1 * 2027");
  // A command that starts with something like a year but is none stays a command.
  EXPECT_EQ(parse("0 0 * * * 2027-report.sh\n").jobs[0].command, "2027-report.sh");
}

// The spec grammar's zone prefix on a job line of its own, as the README
// writes specs: that job's zone, over the file's CRON_TZ line.
TEST(JobsFile, AJobLineMayStartWithItsOwnZone) {
  const auto file = parse("CRON_TZ=Europe/Berlin\nTZ=Asia/Tokyo 0 9 * * * echo tokyo\n0 9 * * * echo berlin\n");
  ASSERT_EQ(file.jobs.size(), 2u);
  EXPECT_EQ(file.jobs[0].spec, "TZ=Asia/Tokyo 0 9 * * *");
  EXPECT_EQ(file.jobs[0].command, "echo tokyo");
  EXPECT_EQ(file.jobs[0].schedule->next(parse_rfc3339("2025-12-31T23:00:00Z")), parse_rfc3339("2026-01-01T00:00:00Z"));  // 9:00 in Tokyo
  EXPECT_EQ(file.jobs[1].spec, "TZ=Europe/Berlin 0 9 * * *");
  EXPECT_EQ(parse("CRON_TZ=UTC\nTZ=Asia/Tokyo @daily echo\n").jobs[0].spec, "TZ=Asia/Tokyo @daily");
  EXPECT_EQ(parse("TZ=Asia/Tokyo 0 9 * * * 2027 echo\n").jobs[0].spec, "TZ=Asia/Tokyo 0 9 * * * 2027");
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
      {"@rebooted echo\n", "jobs.cron:1:1: field descriptor:"},
      {"@reboot\n", "jobs.cron:1:8: missing command after the spec"},
      {"# fleetcron: timeout=soon\n0 * * * * x\n", "jobs.cron:1:22: timeout:"},
      {"# fleetcron: colour=red\n0 * * * * x\n", "jobs.cron:1:14: unknown directive option \"colour\""},
      {"# fleetcron: overlap=sometimes\n0 * * * * x\n", "jobs.cron:1:22: overlap: expected skip, allow or queue"},
      {"# fleetcron: retries=-1\n0 * * * * x\n", "jobs.cron:1:22: retries: expected 0..100"},
      {"# fleetcron: history=0\n0 * * * * x\n", "jobs.cron:1:22: history: expected 1..10000, got \"0\""},
      {"# fleetcron: keep-failed=1001\n0 * * * * x\n", "jobs.cron:1:26: keep-failed: expected 0..1000, got \"1001\""},
      {"# fleetcron: keep-succeeded=x\n0 * * * * x\n", "jobs.cron:1:29: keep-succeeded: expected 0..1000"},
      {"# fleetcron: key=a key=b\n0 * * * * x\n", "jobs.cron:1:20: key given twice"},
      {"# fleetcron: key=k\n\n0 * * * * x\n", "jobs.cron:2:1: the fleetcron directive on line 1 must be followed by a job line"},
      {"# fleetcron: key=k", "jobs.cron:1:1: the fleetcron directive must be followed by a job line"},
      {"# fleetcron: key=a@b\n0 * * * * x\n", "jobs.cron:1:1: key \"a@b\": at most 1024 bytes, without '@'"},
      {"0 * * * * x\n0 * * * * x\n", "jobs.cron:2:1: key \"job-"},
      {"# fleetcron: key=k\n0 * * * * x\n# fleetcron: key=k\n1 * * * * y\n", "jobs.cron:4:1: key \"k\" is already used by the job on line 2"},
      {"CRON_TZ=Mars/Olympus\n", "jobs.cron:1:9: unknown time zone \"Mars/Olympus\""},
      {"TZ=Mars/Olympus 0 9 * * * x\n", "jobs.cron:1:4: field TZ: unknown time zone \"Mars/Olympus\""},
      {"TZ=\"Europe/Berlin x\"\n", "jobs.cron:1:4: TZ takes one zone name"},
      {"NAME=\"unterminated\n", "jobs.cron:1:6: unterminated quoted value"},
      {"# fleetcron: catch-up=400d\n0 * * * * x\n", "jobs.cron:1:23: catch-up: is above the maximum of 366 days"},
      {"# fleetcron: catch-up=later\n0 * * * * x\n", "jobs.cron:1:23: catch-up: duration"},
      {"# fleetcron: recover=maybe\n0 * * * * x\n", "jobs.cron:1:22: recover: expected report or rerun, got \"maybe\""},
      {"# fleetcron: recover=rerun recover=report\n0 * * * * x\n", "jobs.cron:1:28: recover given twice"},
      {"# fleetcron: pause-on-failure=maybe\n0 * * * * x\n",
       "jobs.cron:1:31: pause-on-failure: expected yes or no, got \"maybe\""},
      {"# fleetcron: pause-on-failure=yes pause-on-failure=no\n0 * * * * x\n",
       "jobs.cron:1:35: pause-on-failure given twice"},
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

TEST(JobsFile, PauseOnFailureIsOffUnlessTheDirectiveSaysYes) {
  const auto file = parse("# fleetcron: key=a pause-on-failure=yes\n0 3 * * * x\n# fleetcron: key=b pause-on-failure=no\n"
                          "0 4 * * * y\n0 5 * * * z\n");
  ASSERT_EQ(file.jobs.size(), 3U);
  EXPECT_TRUE(entry_options(file.jobs[0]).pause_on_failure);
  EXPECT_FALSE(entry_options(file.jobs[1]).pause_on_failure);
  EXPECT_FALSE(entry_options(file.jobs[2]).pause_on_failure);
  auto changed = file.jobs[0];
  changed.pause_on_failure = false;
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
  std::string big;
  while (big.size() <= max_jobs_file_bytes) big += "# " + std::string(1000, 'x') + "\n";
  EXPECT_EQ(error_of(big), fmt::format("jobs.cron: {} bytes, above the limit of 16777216", big.size()));
  std::string many;
  for (std::size_t i = 0; i <= max_jobs; ++i) many += "# fleetcron: key=k" + std::to_string(i) + "\n0 3 * * * true\n";
  EXPECT_EQ(error_of(many), "jobs.cron:200002:1: more than 100000 jobs");
}

TEST(JobsFile, PercentEndsTheCommandAndTheRestIsStandardInputAsInVixieCron) {
  const auto file = parse(R"(0 * * * *  mail -s "disk %" root%Dear root,%%the disk is 90\% full
0 * * * *  date +\%Y-\%m-\%d
0 * * * *  cat %
0 * * * *  printf '%s\n' x
)");
  ASSERT_EQ(file.jobs.size(), 4u);
  EXPECT_EQ(file.jobs[0].command, "mail -s \"disk");
  ASSERT_TRUE(file.jobs[0].input);
  EXPECT_EQ(*file.jobs[0].input, "\" root\nDear root,\n\nthe disk is 90% full\n");
  EXPECT_EQ(file.jobs[1].command, "date +%Y-%m-%d");  // the backslash does not reach the shell
  EXPECT_FALSE(file.jobs[1].input);
  ASSERT_TRUE(file.jobs[2].input);
  EXPECT_EQ(*file.jobs[2].input, "\n");  // an empty input is one newline, as cron writes it
  EXPECT_EQ(file.jobs[3].command, "printf '");  // as cron: quotes do not protect '%'
  // As Vixie's do_command.c: "\\%" is a backslash, then the end of the command;
  // in the input a backslash before anything but '%' stays.
  const auto escapes = parse(R"(0 * * * *  echo a\\%in\\%put\n\q\
)");
  EXPECT_EQ(escapes.jobs[0].command, R"(echo a\\)");
  ASSERT_TRUE(escapes.jobs[0].input);
  EXPECT_EQ(*escapes.jobs[0].input, "in\\%put\\n\\q\\\n");
  EXPECT_EQ(error_of("0 * * * *  %input\n"), "jobs.cron:1:12: empty command before '%' (write \\% for a literal %)");
}

TEST(JobsFile, AFileSettingKeepsPercentLiteral) {
  const auto file = parse("# fleetcron-file: percent=literal\n0 * * * *  date +%Y\\%m\n");
  ASSERT_EQ(file.jobs.size(), 1u);
  EXPECT_EQ(file.percent, PercentMode::literal);
  EXPECT_EQ(file.jobs[0].command, "date +%Y\\%m");
  EXPECT_FALSE(file.jobs[0].input);
  EXPECT_EQ(error_of("0 * * * * true\n# fleetcron-file: percent=literal\n"),
            "jobs.cron:2:1: the fleetcron-file line must come before the first job (line 1)");
  EXPECT_EQ(error_of("# fleetcron-file: percent=maybe\n"),
            "jobs.cron:1:19: unknown file setting \"percent=maybe\" (known: percent=input, percent=literal, format=user, "
            "format=system)");
  EXPECT_EQ(error_of("# fleetcron-file: percent=input\n# fleetcron-file: percent=literal\n"),
            "jobs.cron:2:1: a second fleetcron-file line (the first is line 1)");
}

TEST(JobsFile, ASystemCrontabValidatesAsCronReadsIt) {
  const auto file = parse(R"(# /etc/crontab: system-wide crontab
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=root

@reboot     echo booted
17 *  * * * cd / && run-parts --report /etc/cron.hourly
@daily      test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )
5 0 * * *   tar czf /backup/$(date +\%F).tgz /etc
)");
  ASSERT_EQ(file.jobs.size(), 4u);
  ASSERT_EQ(file.notices.size(), 1u);
  EXPECT_EQ(file.notices[0].line, 4);
  EXPECT_NE(file.notices[0].message.find("MAILTO is not supported"), std::string::npos);
  EXPECT_NE(file.notices[0].message.find("on-failure="), std::string::npos);
  EXPECT_TRUE(file.jobs[0].at_start);
  EXPECT_EQ(file.jobs[0].spec, "@reboot");
  EXPECT_FALSE(file.jobs[0].schedule->next(parse_rfc3339("2026-01-01T00:00:00Z")));
  EXPECT_EQ(entry_options(file.jobs[0]).scope, EntryScope::replica);
  EXPECT_FALSE(file.jobs[1].at_start);
  EXPECT_EQ(entry_options(file.jobs[1]).scope, EntryScope::fleet);
  EXPECT_EQ(file.jobs[3].command, "tar czf /backup/$(date +%F).tgz /etc");
  EXPECT_EQ(file.jobs[3].environment.back(), (std::pair<std::string, std::string>{"MAILTO", "root"}));
}

TEST(JobsFile, ScopeDirEnvFileAndUserDirectives) {
  const auto file = parse(R"(# fleetcron: scope=replica dir="/srv/my app" env-file=app.env user=nobody
*/5 * * * *  ./warm-cache
)");
  ASSERT_EQ(file.jobs.size(), 1u);
  const JobDefinition& job = file.jobs[0];
  EXPECT_EQ(job.scope, JobScope::replica);
  EXPECT_EQ(entry_options(job).scope, EntryScope::replica);
  EXPECT_EQ(job.working_directory, "/srv/my app");
  EXPECT_EQ(job.env_file, "app.env");
  EXPECT_EQ(job.user, "nobody");
  EXPECT_EQ(job.dir_origin.line, 1);
  EXPECT_EQ(job.dir_origin.column, 32);
  EXPECT_EQ(error_of("# fleetcron: scope=everywhere\n0 * * * * x\n"),
            "jobs.cron:1:20: scope: expected fleet or replica, got \"everywhere\"");
  EXPECT_EQ(error_of("# fleetcron: dir=\"/a b\n0 * * * * x\n"), "jobs.cron:1:18: unterminated quoted value");
  // Defaults apply where the directive says nothing.
  ParseOptions options;
  const auto defaulted = parse_jobs_file("# fleetcron: user=root\n0 * * * * a\n0 * * * * b\n", "jobs.cron", options,
                                         JobDefaults{.dir = "/tmp", .env_file = "", .user = "nobody"});
  EXPECT_EQ(defaulted.jobs[0].user, "root");
  EXPECT_EQ(defaulted.jobs[1].user, "nobody");
  EXPECT_EQ(defaulted.jobs[1].working_directory, "/tmp");
  EXPECT_EQ(defaulted.jobs[1].user_origin.line, 0);
}

/// A scratch directory with files, removed at the end.
struct Scratch : test::ScratchDirectory {
  const std::string& dir = path();
  std::string load_error(const std::string& jobs, const JobDefaults& defaults = {}) const {
    try {
      (void)load_jobs_file(write("jobs.cron", jobs), {}, defaults);
    } catch (const JobsFileError& e) {
      return std::string(e.what()).substr(dir.size() + 1);
    }
    return "(no error)";
  }
};

TEST(JobsFile, LoadReadsEnvFilesAndChecksDirectoriesAndUsers) {
  const Scratch scratch;
  scratch.write("app.env", "# settings\nexport MODE=fast\nGREETING=\"hello world\"\n\nMODE=faster\n");
  std::filesystem::create_directory(scratch.dir + "/work");
  const auto file = load_jobs_file(
      scratch.write("jobs.cron", "MODE=slow\n# fleetcron: env-file=app.env dir=work user=root\n0 * * * * true\n"), {});
  ASSERT_EQ(file.jobs.size(), 1u);
  const JobDefinition& job = file.jobs[0];
  EXPECT_EQ(job.env_file, scratch.dir + "/app.env");  // relative to the jobs file
  EXPECT_EQ(job.working_directory, scratch.dir + "/work");
  using V = std::pair<std::string, std::string>;
  EXPECT_EQ(job.environment, (std::vector<V>{{"MODE", "slow"}, {"MODE", "fast"}, {"GREETING", "hello world"}, {"MODE", "faster"}}));
  if (geteuid() == 0) {
    ASSERT_TRUE(job.run_as);
    EXPECT_EQ(job.run_as->uid, 0u);
  }
  EXPECT_EQ(scratch.load_error("# fleetcron: dir=missing\n0 * * * * x\n"),
            fmt::format("jobs.cron:1:18: dir: {}/missing: No such file or directory", scratch.dir));
  EXPECT_EQ(scratch.load_error("# fleetcron: dir=app.env\n0 * * * * x\n"),
            fmt::format("jobs.cron:1:18: dir: {}/app.env: not a directory", scratch.dir));
  EXPECT_EQ(scratch.load_error("# fleetcron: user=no-such-user-here\n0 * * * * x\n"),
            "jobs.cron:1:19: user: user \"no-such-user-here\" does not exist (not in the passwd database)");
  EXPECT_EQ(scratch.load_error("0 * * * * x\n", JobDefaults{.dir = "", .env_file = "/dev/null", .user = ""}),
            "jobs.cron:1:1: env-file (from [defaults]): /dev/null: not a regular file");
  // The error names the place and the name, never the rest of the line:
  // an env file holds secrets, and errors reach logs.
  const auto env_error = [&](const std::string& text) {
    scratch.write("bad.env", text);
    try {
      (void)load_jobs_file(scratch.write("jobs.cron", "# fleetcron: env-file=bad.env\n0 * * * * x\n"), {});
    } catch (const JobsFileError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_EQ(env_error("A=1\nDB_PASSWORD hunter2\n"),
            scratch.dir + "/bad.env:2:13: expected NAME=value: \"DB_PASSWORD\" is not followed by '=' (the rest of "
                          "the line is not shown: env files hold secrets)");
  EXPECT_EQ(env_error("  9LIVES=hunter2\n"),
            scratch.dir + "/bad.env:1:3: expected NAME=value: a name starts with a letter or '_' (the line's text is "
                          "not shown: env files hold secrets)");
}

TEST(JobsFile, WithoutRootOnlyTheDaemonsOwnUserIsAccepted) {
  const RunAs nobody = resolve_run_as("nobody");
  if (geteuid() == 0) {
    EXPECT_EQ(run_as_refusal(nobody), "");
  } else {
    EXPECT_NE(run_as_refusal(nobody).find("not root"), std::string::npos);
  }
  EXPECT_EQ(run_as_refusal(resolve_run_as(std::to_string(geteuid()))), "");
}

}  // namespace
}  // namespace fleetcron::daemon
