// The process runner with real /bin/sh processes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon/run/process_runner.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

struct Output {
  std::mutex mutex;
  std::vector<std::string> lines;
  OutputSink sink() {
    return [this](std::string_view stream, std::string_view line) {
      std::lock_guard guard(mutex);
      lines.push_back(std::string(stream) + ": " + std::string(line));
    };
  }
};

CommandSpec spec(std::string command) {
  CommandSpec s;
  s.command = std::move(command);
  s.environment = {"PATH=/usr/bin:/bin", "GREETING=hi"};
  return s;
}

TEST(ProcessRunner, RunsWithTheEnvironmentAndReadsBothStreamsLineByLine) {
  Output output;
  const auto result = run_command(spec("echo \"$GREETING\"; echo oops >&2; printf 'no newline'; exit 3"), {}, output.sink());
  EXPECT_TRUE(result.started);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.succeeded());
  EXPECT_EQ(result.describe(), "exit 3");
  std::sort(output.lines.begin(), output.lines.end());
  EXPECT_EQ(output.lines, (std::vector<std::string>{"stderr: oops", "stdout: hi", "stdout: no newline"}));
}

TEST(ProcessRunner, TimeoutEndsTheWholeProcessGroup) {
  const std::string pid_file = "/tmp/fleetcron-runner-test-" + std::to_string(getpid());
  // A background grandchild that would outlive a kill of the shell alone.
  auto s = spec("sleep 30 & echo $! > " + pid_file + "; wait");
  s.timeout = 300ms;
  s.kill_grace = 200ms;
  const auto result = run_command(s, {}, {});
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGTERM);
  EXPECT_LT(result.duration, 5s);
  EXPECT_NE(result.describe().find("after timeout"), std::string::npos);
  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  in >> grandchild;
  std::remove(pid_file.c_str());
  ASSERT_GT(grandchild, 0);
  // The group got SIGTERM: the grandchild is gone too (wait for its exit).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0 && errno == ESRCH;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "pid " << grandchild;
}

TEST(ProcessRunner, SigkillAfterTheGraceWhenSigtermIsIgnored) {
  auto s = spec("trap '' TERM; sleep 30 & wait; sleep 30");
  s.timeout = 100ms;
  s.kill_grace = 200ms;
  const auto result = run_command(s, {}, {});
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_LT(result.duration, 5s);
}

TEST(ProcessRunner, AGroupMemberThatIgnoresSigtermIsKilledAfterTheGraceEvenWhenTheShellIsGone) {
  // Review finding: once the shell was reaped, the SIGKILL was never sent.
  const std::string pid_file = "/tmp/fleetcron-runner-survivor-" + std::to_string(getpid());
  auto s = spec("sh -c 'trap \"\" TERM; sleep 30' & echo $! > " + pid_file + "; wait");
  s.timeout = 200ms;
  s.kill_grace = 300ms;
  const auto result = run_command(s, {}, {});
  EXPECT_TRUE(result.timed_out);
  std::ifstream in(pid_file);
  pid_t survivor = 0;
  in >> survivor;
  std::remove(pid_file.c_str());
  ASSERT_GT(survivor, 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = kill(survivor, 0) != 0 && errno == ESRCH;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "pid " << survivor << " survived the SIGKILL";
}

TEST(ProcessRunner, TheDaemonsDescriptorsDoNotReachTheJob) {
  const int opened = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, like hiredis's sockets
  const int fd = dup2(opened, 100);                   // a number ls's own descriptors will not take
  close(opened);
  ASSERT_EQ(fd, 100);
  Output output;
  const auto result = run_command(spec("ls /proc/self/fd | tr '\\n' ' '"), {}, output.sink());
  close(fd);
  ASSERT_TRUE(result.succeeded());
  ASSERT_EQ(output.lines.size(), 1u);
  EXPECT_EQ(output.lines[0].find(" " + std::to_string(fd) + " "), std::string::npos) << output.lines[0];
}

TEST(ProcessRunner, StopTokenEndsTheCommand) {
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop.request_stop();
  });
  const auto result = run_command(spec("sleep 30"), stop.get_token(), {});
  stopper.join();
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.signal, SIGTERM);
}

TEST(ProcessRunner, OutputIsBoundedPerLineAndPerRun) {
  Output output;
  auto s = spec("head -c 10000 /dev/zero | tr '\\0' x; echo; yes line | head -n 100000");
  s.max_line_bytes = 100;
  s.max_output_bytes = 2000;
  const auto result = run_command(s, {}, output.sink());
  EXPECT_TRUE(result.succeeded()) << result.describe();
  ASSERT_FALSE(output.lines.empty());
  EXPECT_EQ(output.lines[0], "stdout: " + std::string(100, 'x') + " [line truncated]");
  EXPECT_LE(result.output_bytes, 2000u);
  EXPECT_GT(result.dropped_bytes, 490'000u);  // 100,000 lines of "line\n", almost all dropped
}

// As a container's PID 1 the daemon inherits the jobs' orphaned
// grandchildren; reap_orphans() reaps those and never a run's own shell.
// (Here the test process is made a child subreaper: it inherits them the
// same way.)
TEST(ProcessRunner, OrphanedGrandchildrenAreReapedAndRunsKeepTheirStatus) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Output output;
  // The subshell exits at once; its background child outlives it, orphaned.
  const auto result = run_command(spec("(sleep 0.2 &) ; exit 4"), {}, output.sink());
  EXPECT_EQ(result.exit_code, 4);  // the run's own status, not taken by a reaper
  std::size_t reaped = 0;
  for (int i = 0; i < 300 && reaped == 0; ++i) {
    reaped += reap_orphans();
    if (reaped == 0) std::this_thread::sleep_for(10ms);  // the orphan's sleep must end first
  }
  EXPECT_EQ(reaped, 1u);
  EXPECT_EQ(reap_orphans(), 0u);
  // A run in progress is never reaped behind its back.
  std::thread reaper([] {
    for (int i = 0; i < 50; ++i) {
      (void)reap_orphans();
      std::this_thread::sleep_for(2ms);
    }
  });
  const auto quick = run_command(spec("exit 7"), {}, output.sink());
  reaper.join();
  EXPECT_EQ(quick.exit_code, 7);
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

TEST(ProcessRunner, ACommandThatCannotStartIsAFailedResultNotACrash) {
  auto s = spec("true");
  s.shell = "/nonexistent/shell";
  const auto result = run_command(s, {}, {});
  EXPECT_FALSE(result.started);
  EXPECT_EQ(result.describe(), "not started: /nonexistent/shell: No such file or directory");
  const auto missing = run_command(spec("/nonexistent/program"), {}, {});
  EXPECT_TRUE(missing.started);
  EXPECT_EQ(missing.exit_code, 127);  // the shell's "not found"
}

TEST(ProcessRunner, StandardInputDirectoryAndAccount) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto s = spec("cat; pwd; id -u; id -G");
  s.input = "first line\nsecond line\n";
  s.working_directory = dir;
  const bool root = geteuid() == 0;
  if (root) s.run_as = resolve_run_as("nobody");
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  Output output;
  const auto result = run_command(s, {}, output.sink());
  ASSERT_TRUE(result.succeeded()) << result.describe();
  // The child shares the daemon's memory until its exec (vfork): its
  // switch to the user must never reach the daemon's threads (glibc's
  // setuid() would signal them, from their list in the shared memory).
  EXPECT_EQ(geteuid(), uid);
  EXPECT_EQ(getegid(), gid);
  std::thread([&] { EXPECT_EQ(geteuid(), uid); }).join();
  ASSERT_EQ(output.lines.size(), 5u);
  EXPECT_EQ(output.lines[0], "stdout: first line");
  EXPECT_EQ(output.lines[1], "stdout: second line");
  EXPECT_EQ(output.lines[2], "stdout: " + std::filesystem::canonical(dir).string());
  const RunAs expected = root ? resolve_run_as("nobody") : resolve_run_as(std::to_string(geteuid()));
  EXPECT_EQ(output.lines[3], "stdout: " + std::to_string(expected.uid));
  if (root) {
    std::string groups;
    for (const gid_t g : expected.groups) groups += (groups.empty() ? "" : " ") + std::to_string(g);
    EXPECT_EQ(output.lines[4], "stdout: " + groups);  // the user's groups, none of the daemon's
  }
}

TEST(ProcessRunner, AMissingDirectoryOrAnOversizedInputIsAStartError) {
  auto s = spec("true");
  s.working_directory = "/nonexistent/dir";
  const auto result = run_command(s, {}, {});
  EXPECT_FALSE(result.started);
  EXPECT_EQ(result.describe(), "not started: dir=/nonexistent/dir: No such file or directory");
  auto big = spec("cat >/dev/null");
  big.input = std::string(max_input_bytes + 1, 'x');
  EXPECT_EQ(run_command(big, {}, {}).describe(),
            fmt::format("not started: standard input of {} bytes, above the limit of {}", max_input_bytes + 1, max_input_bytes));
  auto full = spec("wc -c");
  full.input = std::string(max_input_bytes, 'x');
  Output output;
  ASSERT_TRUE(run_command(full, {}, output.sink()).succeeded());
  EXPECT_EQ(output.lines.at(0), fmt::format("stdout: {}", max_input_bytes));
}

}  // namespace
}  // namespace fleetcron::daemon
