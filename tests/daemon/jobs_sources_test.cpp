// System crontabs and cron.d directories (daemon/config/jobs_sources.h): the user
// column, the format a file is read in, and several files and directories
// read as one set of jobs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/config/jobs_sources.h"
#include "support/scratch_directory.h"

namespace fleetcron::daemon {
namespace {

/// A scratch directory, removed at the end.
struct Scratch : test::ScratchDirectory {
  const std::string& dir = path();
  /// The error of loading `paths` (relative to the scratch directory), or "(no error)".
  std::string error_of(const std::vector<std::string>& paths, std::optional<CrontabFormat> format = std::nullopt) const {
    try {
      (void)load(paths, format);
    } catch (const JobsFileError& e) {
      std::string message = e.what();
      for (std::size_t at; (at = message.find(dir + "/")) != std::string::npos;) message.erase(at, dir.size() + 1);
      return message;
    }
    return "(no error)";
  }
  JobsSources load(const std::vector<std::string>& paths, std::optional<CrontabFormat> format = std::nullopt) const {
    std::vector<std::string> full;
    for (const auto& path : paths) full.push_back(dir + "/" + path);
    return load_jobs_sources(full, {}, {}, format);
  }
};

// Debian's /etc/crontab, as the cron package installs it.
constexpr const char* debian_crontab =
    "SHELL=/bin/sh\n"
    "PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin\n"
    "# *  *  *  *  * user-name command to be executed\n"
    "17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly\n"
    "25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }\n";

TEST(JobsSources, ASystemCrontabsUserColumnIsTheJobsUser) {
  const JobsFile file = parse_jobs_file(debian_crontab, "crontab", {}, {}, CrontabFormat::system);
  ASSERT_EQ(file.jobs.size(), 2u);
  EXPECT_EQ(file.jobs[0].user, "root");
  EXPECT_TRUE(file.jobs[0].user_from_column);
  EXPECT_EQ(file.jobs[0].user_origin.line, 4);
  EXPECT_EQ(file.jobs[0].user_origin.column, 12);
  EXPECT_EQ(file.jobs[0].command, "cd / && run-parts --report /etc/cron.hourly");
  EXPECT_EQ(file.jobs[0].command_column, 17);
  EXPECT_EQ(file.jobs[1].command, "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }");
  EXPECT_EQ(file.jobs[0].file, "crontab");
}

TEST(JobsSources, TheFilesOwnFormatLineWinsAndAColumnClashesWithUser) {
  const JobsFile file = parse_jobs_file("# fleetcron-file: percent=literal format=system\n0 * * * * nobody echo 50%\n",
                                        "jobs.cron", {});
  EXPECT_EQ(file.format, CrontabFormat::system);
  EXPECT_EQ(file.format_line, 1);
  EXPECT_EQ(file.percent, PercentMode::literal);
  ASSERT_EQ(file.jobs.size(), 1u);
  EXPECT_EQ(file.jobs[0].user, "nobody");
  EXPECT_EQ(file.jobs[0].command, "echo 50%");
  auto error_of = [](std::string_view text) {
    try {
      (void)parse_jobs_file(text, "jobs.cron", {}, {}, CrontabFormat::system);
    } catch (const JobsFileError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of("# fleetcron: user=root\n0 * * * * nobody true\n"),
            "jobs.cron:2:11: the user column gives \"nobody\" and the directive on line 1 gives user=root: keep one");
  EXPECT_EQ(error_of("0 * * * * root\n"),
            "jobs.cron:1:15: missing command after the user column (\"root\"): a system crontab line is the spec, a user, "
            "then the command");
  EXPECT_EQ(error_of("# fleetcron-file: format=cron\n"),
            "jobs.cron:1:19: unknown file setting \"format=cron\" (known: percent=input, percent=literal, format=user, "
            "format=system)");
}

TEST(JobsSources, TheUserColumnIsReadBeforeTheFieldCountAndIsPartOfTheKey) {
  // "jun" is a user here, not June; FRI#2 is a weekday term.
  const JobsFile file = parse_jobs_file("0 3 * * * jun /home/jun/bin/backup\n0 * * * * alice fetchmail\n"
                                        "0 * * * * bob fetchmail\n",
                                        "crontab", {}, {}, CrontabFormat::system);
  ASSERT_EQ(file.jobs.size(), 3u);
  EXPECT_EQ(file.jobs[0].user, "jun");
  EXPECT_NE(file.jobs[1].key, file.jobs[2].key) << "alice's and bob's fetchmail are two jobs";
  ParseOptions seconds;
  seconds.seconds = SecondsField::required;
  EXPECT_EQ(parse_jobs_file("0 0 12 ? * FRI#2 /usr/bin/report\n0 0 12 L * 5l /usr/bin/last\n", "jobs.cron", seconds)
                .jobs.size(),
            2u);
}

TEST(JobsSources, ASystemLineInAUserFileIsRefusedNamingTheFormatOption) {
  const Scratch scratch;
  scratch.write("jobs.cron", debian_crontab);
  EXPECT_EQ(scratch.error_of({"jobs.cron"}),
            "jobs.cron:4:12: the command starts with \"root\", an account and no program on PATH: this reads as a system "
            "crontab line (spec, user, command); give --crontab-format=system or a \"# fleetcron-file: format=system\" "
            "line, or the program's path if \"root\" is one");
  EXPECT_EQ(scratch.load({"jobs.cron"}, CrontabFormat::system).job_count(), 2u);
  // An account that is also the program run (Debian's "sync" account and
  // /bin/sync) is the program: the line means what a user crontab means.
  scratch.write("sync.cron", "0 * * * * sync && echo synced\n");
  EXPECT_EQ(scratch.load({"sync.cron"}).jobs().front()->command, "sync && echo synced");
  // A user file's command read as a user: the column's error names the format.
  scratch.write("user.cron", "# fleetcron-file: format=system\n0 * * * * /usr/bin/backup --full\n");
  EXPECT_EQ(scratch.error_of({"user.cron"}),
            "user.cron:2:11: the user column: user \"/usr/bin/backup\" does not exist (not in the passwd database); "
            "user.cron reads its lines as system crontab lines (spec, user, command) (format=system on line 1)");
}

TEST(JobsSources, ADirectoryIsReadAsCronReadsCronD) {
  const Scratch scratch;
  scratch.write("cron.d/e2scrub_all",
                "30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all_cron\n");
  scratch.write("cron.d/php", "09,39 *     * * *     root   [ -x /usr/lib/php/sessionclean ] && true\n");
  scratch.write("cron.d/.placeholder", "# DO NOT EDIT OR REMOVE\n");
  scratch.write("cron.d/php.dpkg-old", "0 * * * * root old\n");
  scratch.write("cron.d/backup~", "0 * * * * root old\n");
  std::filesystem::create_directory(scratch.dir + "/cron.d/sub");
  scratch.write("extra.cron", "0 12 * * * echo noon\n");
  // Only /etc/cron.d is known to hold system crontabs: another directory
  // (users' crontabs?) is read without the column, and its "root" lines
  // are refused naming the option.
  EXPECT_NE(scratch.error_of({"cron.d"}).find("cron.d/e2scrub_all:1:12: the command starts with \"root\""),
            std::string::npos);
  scratch.write("extra.cron", "# fleetcron-file: format=user\n0 12 * * * echo noon\n");
  const JobsSources sources = scratch.load({"cron.d", "extra.cron"}, CrontabFormat::system);
  ASSERT_EQ(sources.files.size(), 3u);
  EXPECT_EQ(sources.files[0].path, scratch.dir + "/cron.d/e2scrub_all");  // name order
  EXPECT_EQ(sources.files[0].format, CrontabFormat::system);
  EXPECT_EQ(sources.files[1].path, scratch.dir + "/cron.d/php");
  EXPECT_EQ(sources.files[2].format, CrontabFormat::user);  // its own line wins
  EXPECT_EQ(sources.job_count(), 3u);
  EXPECT_EQ(sources.jobs()[1]->command, "[ -x /usr/lib/php/sessionclean ] && true");
  std::vector<std::string> skipped;
  for (const auto& s : sources.skipped) skipped.push_back(s.path.substr(scratch.dir.size() + 1));
  EXPECT_EQ(skipped, (std::vector<std::string>{"cron.d/.placeholder", "cron.d/backup~", "cron.d/php.dpkg-old", "cron.d/sub"}));
  EXPECT_EQ(sources.describe(), scratch.dir + "/cron.d/e2scrub_all and 2 more file(s)");
}

// 100,000 jobs (the fleet's catalogue's bound) in a directory of files;
// one more is refused naming the file and line where the limit is passed.
TEST(JobsSources, AHundredThousandJobsAcrossFilesAreReadAndOneMoreIsRefused) {
  const Scratch scratch;
  for (int file = 0; file < 4; ++file) {
    std::string text;
    for (int i = 0; i < 25'000; ++i) {
      text += "# fleetcron: key=customer-" + std::to_string(file * 25'000 + i) + "\n" + std::to_string(i % 60) +
              " 3 * * * true\n";
    }
    scratch.write("jobs.d/part" + std::to_string(file), text);
  }
  EXPECT_EQ(scratch.load({"jobs.d"}).job_count(), max_jobs);
  scratch.write("more.cron", "# header\n0 4 * * * echo one more\n");
  EXPECT_EQ(scratch.error_of({"jobs.d", "more.cron"}), "more.cron:2:1: more than 100000 jobs in all the files given");
}

TEST(JobsSources, KeysAreUniqueAcrossFiles) {
  const Scratch scratch;
  scratch.write("a.cron", "# fleetcron: key=backup\n0 3 * * * /usr/local/bin/backup\n");
  scratch.write("b.cron", "\n# fleetcron: key=backup\n0 4 * * * /usr/local/bin/backup --again\n");
  EXPECT_EQ(scratch.error_of({"a.cron", "b.cron"}), "b.cron:3:1: key \"backup\" is already used by the job at a.cron:2");
  scratch.write("c.cron", "0 3 * * * true\n");
  scratch.write("d.cron", "0 3 * * * true\n");
  EXPECT_EQ(scratch.error_of({"c.cron", "d.cron"}).rfind("d.cron:1:1: key \"job-", 0), 0u);
  EXPECT_EQ(scratch.error_of({"missing.cron"}), "missing.cron: cannot read: No such file or directory");
  EXPECT_EQ(scratch.error_of({}), "fleetcron: no jobs file: give one or more files or directories");
}

TEST(JobsSources, TheFormatFollowsTheFlagThenThePath) {
  EXPECT_EQ(default_format("/etc/crontab", false, std::nullopt), CrontabFormat::system);
  EXPECT_EQ(default_format("/etc/cron.d/certbot", false, std::nullopt), CrontabFormat::system);
  EXPECT_EQ(default_format("/etc/cron.d/../crontab", false, std::nullopt), CrontabFormat::system);
  EXPECT_EQ(default_format("/srv/jobs.cron", false, std::nullopt), CrontabFormat::user);
  EXPECT_EQ(default_format("/srv/jobs.d/a", true, std::nullopt), CrontabFormat::user);
  EXPECT_EQ(default_format("/var/spool/cron/crontabs/alice", true, std::nullopt), CrontabFormat::user);
  EXPECT_EQ(default_format("/etc/crontab", false, CrontabFormat::user), CrontabFormat::user);
  EXPECT_EQ(crontab_format_from_string("auto"), std::nullopt);
  EXPECT_THROW((void)crontab_format_from_string("vixie"), std::invalid_argument);
  EXPECT_TRUE(is_cron_d_name("e2scrub_all"));
  EXPECT_TRUE(is_cron_d_name("popularity-contest"));
  EXPECT_FALSE(is_cron_d_name("php.dpkg-dist"));
  EXPECT_FALSE(is_cron_d_name(""));
}

}  // namespace
}  // namespace fleetcron::daemon
