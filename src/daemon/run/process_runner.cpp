#include "daemon/run/process_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <grp.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <functional>
#include <mutex>
#include <set>
#include <vector>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <optional>
#include <utility>

namespace fleetcron::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// After the main process exits, output still held open by its background
// children is read for at most this long.
constexpr auto drain_after_exit = std::chrono::seconds{1};

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// Splits a stream into bounded lines.
class LineReader {
 public:
  LineReader(std::string_view name, const CommandSpec& spec, CommandResult& result, const OutputSink& sink)
      : name_(name), spec_(spec), result_(result), sink_(sink) {}

  void feed(std::string_view data) {
    for (const char c : data) {
      if (c == '\n') {
        flush();
        continue;
      }
      if (line_.size() < spec_.max_line_bytes) {
        line_.push_back(c);
      } else {
        truncated_ = true;
      }
    }
  }
  void flush() {
    const std::size_t bytes = line_.size() + 1;
    if (result_.output_bytes + bytes > spec_.max_output_bytes) {
      result_.dropped_bytes += bytes;
    } else {
      result_.output_bytes += bytes;
      if (truncated_) line_ += " [line truncated]";
      if (sink_) sink_(name_, line_);
    }
    line_.clear();
    truncated_ = false;
  }
  void finish() {
    if (!line_.empty() || truncated_) flush();
  }

 private:
  std::string_view name_;
  const CommandSpec& spec_;
  CommandResult& result_;
  const OutputSink& sink_;
  std::string line_;
  bool truncated_ = false;
};

struct ProcessStat {
  pid_t pid = 0;
  char state = '?';
  pid_t parent = 0;
  pid_t group = 0;
};

// /proc/<id>/stat's text; empty if the process is gone. Read with read(2),
// not a stream: a process that exits between the open and the read makes
// the read fail (ESRCH), which libstdc++'s filebuf throws as an exception
// whatever the stream's exception mask (it killed a test, and would have
// killed the daemon, on a busy host).
std::string process_stat_text(long id) {
  const std::string path = fmt::format("/proc/{}/stat", id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  std::array<char, 512> buffer{};
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

// Calls `visit` for each process in /proc (pid, state, parent, group)
// until it returns false.
void for_each_process(const std::function<bool(const ProcessStat&)>& visit) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long id = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || id <= 0) continue;
    const std::string text = process_stat_text(id);
    const auto close_paren = text.rfind(')');  // the command name may hold anything
    if (close_paren == std::string::npos || close_paren + 2 >= text.size()) continue;
    std::istringstream fields(text.substr(close_paren + 2));
    ProcessStat stat;
    stat.pid = static_cast<pid_t>(id);
    long parent = 0, group = 0;
    fields >> stat.state >> parent >> group;
    stat.parent = static_cast<pid_t>(parent);
    stat.group = static_cast<pid_t>(group);
    if (!visit(stat)) break;
  }
  closedir(proc);
}

// Whether the group still has a live member besides its leader (a zombie
// kept by the runner, so `kill(-pgid, 0)` alone would always succeed).
bool group_has_others(pid_t pgid) {
  if (kill(-pgid, 0) != 0) return false;
  bool found = false;
  for_each_process([&](const ProcessStat& process) {
    found = process.group == pgid && process.pid != pgid && process.state != 'Z';
    return !found;
  });
  return found;
}

// The shells the runner waits for: reap_orphans() leaves them alone.
std::mutex owned_mutex;
std::set<pid_t> owned;  // guarded by owned_mutex

}  // namespace

std::string CommandResult::describe() const {
  if (!started) return "not started: " + start_error;
  std::string out = signal != 0 ? fmt::format("signal {} ({})", signal, strsignal(signal)) : fmt::format("exit {}", exit_code);
  if (timed_out) out += " after timeout";
  if (stopped) out += " after stop";
  return out;
}

namespace {

/// What the child must do between vfork() and exec(), prepared before the
/// vfork: the child shares the daemon's memory, its parent thread waits
/// until the exec, and only async-signal-safe calls that touch nothing of
/// the daemon are allowed (no allocation, no locks, no errno kept).
struct ChildPlan {
  std::string shell, dash_c = "-c", command;
  std::vector<std::string> environment;
  std::vector<char*> argv, envp;
  int input = -1, output = -1, errors = -1, report = -1;  // report: the CLOEXEC pipe exec() closes
  const char* directory = nullptr;
  const RunAs* run_as = nullptr;
};

/// A failed step in the child, as the parent reads it from the report pipe.
struct ChildFailure {
  int step = 0;  // index into child_steps
  int error = 0;
};
constexpr const char* child_steps[] = {"setpgid", "dup2", "setgroups", "setgid", "setuid", "chdir", "exec"};

[[noreturn]] void child_fail(const ChildPlan& plan, int step) {
  const ChildFailure failure{step, errno};
  (void)!write(plan.report, &failure, sizeof failure);
  _exit(127);
}

[[noreturn]] void run_child(const ChildPlan& plan) {
  // Its own process group (so a timeout reaches its children), default
  // dispositions and no blocked signals, whatever the daemon's threads have.
  if (setpgid(0, 0) != 0) child_fail(plan, 0);
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) ::signal(signal_number, SIG_DFL);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  sigprocmask(SIG_SETMASK, &no_signals, nullptr);
  if (dup2(plan.input, 0) < 0 || dup2(plan.output, 1) < 0 || dup2(plan.errors, 2) < 0) child_fail(plan, 1);
  // Nothing else of the daemon reaches the job: hiredis, nats.c and the
  // HTTP server open sockets without O_CLOEXEC, and a job's background
  // child must not keep the daemon's port or connections open. The report
  // pipe stays (CLOEXEC: exec closes it, which tells the parent it worked).
  if (plan.report > 3) close_range(3, static_cast<unsigned>(plan.report) - 1, 0);
  close_range(static_cast<unsigned>(plan.report) + 1, ~0U, 0);
  if (plan.run_as != nullptr) {
    // The raw system calls: glibc's wrappers signal every thread of the
    // process to change its credentials too, and the thread list they read
    // here is the daemon's (shared memory until the exec).
    if (syscall(SYS_setgroups, plan.run_as->groups.size(), plan.run_as->groups.data()) != 0) child_fail(plan, 2);
    if (syscall(SYS_setgid, plan.run_as->gid) != 0) child_fail(plan, 3);
    if (syscall(SYS_setuid, plan.run_as->uid) != 0) child_fail(plan, 4);
  }
  // As the user, as cron does: a directory it cannot enter is an error.
  if (plan.directory != nullptr && chdir(plan.directory) != 0) child_fail(plan, 5);
  execve(plan.shell.c_str(), plan.argv.data(), plan.envp.data());
  child_fail(plan, 6);
}

/// After the vfork: EOF on the report pipe means exec() worked.
bool child_started(int report, const CommandSpec& spec, CommandResult& result) {
  ChildFailure failure;
  ssize_t got = 0;
  do {
    got = read(report, &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof failure)) return true;
  const std::string_view step = child_steps[failure.step];
  if (step == "exec") {
    result.start_error = fmt::format("{}: {}", spec.shell, std::strerror(failure.error));
  } else if (step == "chdir") {
    result.start_error = fmt::format("dir={}: {}{}", spec.working_directory, std::strerror(failure.error),
                                     spec.run_as ? " (as user " + spec.run_as->name + ")" : std::string());
  } else if (spec.run_as && (step == "setgroups" || step == "setgid" || step == "setuid")) {
    result.start_error = fmt::format("user={}: {}: {}", spec.run_as->name, step, std::strerror(failure.error));
  } else {
    result.start_error = fmt::format("{}: {}", step, std::strerror(failure.error));
  }
  return false;
}

// Starts `spec`'s shell with stdin, stdout and stderr on the given pipe
// ends; registers it as owned. Returns its pid, or -1 with
// result.start_error set (the child, if any, reaped).
pid_t spawn(const CommandSpec& spec, const Fd& input, const Fd& out_write, const Fd& err_write, CommandResult& result) {
  ChildPlan plan;
  plan.shell = spec.shell;
  plan.command = spec.command;
  plan.environment = spec.environment;
  plan.argv = {plan.shell.data(), plan.dash_c.data(), plan.command.data(), nullptr};
  for (auto& entry : plan.environment) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  plan.input = input.get();
  plan.output = out_write.get();
  plan.errors = err_write.get();
  if (!spec.working_directory.empty()) plan.directory = spec.working_directory.c_str();
  if (spec.run_as) plan.run_as = &*spec.run_as;
  std::array<int, 2> report{};
  if (pipe2(report.data(), O_CLOEXEC) != 0) {
    result.start_error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  Fd report_read(report[0]), report_write(report[1]);
  plan.report = report_write.get();
  std::unique_lock owning(owned_mutex);  // started and owned at once: reap_orphans() never takes it
  // vfork, not fork: a fork copies the daemon's page tables (tens of MB
  // with many jobs) and stops its threads for the copy, which cost 10 ms
  // of CPU per run at 100 runs a second (bench/fleet_bench.sh). Every
  // signal stays blocked until the child has reset its handlers: a handler
  // of the daemon's must never run in the child, on the daemon's memory.
  sigset_t all_signals, before;
  sigfillset(&all_signals);
  pthread_sigmask(SIG_SETMASK, &all_signals, &before);
  const pid_t pid = vfork();
  if (pid == 0) run_child(plan);
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid > 0) owned.insert(pid);
  owning.unlock();
  report_write.reset();
  if (pid < 0) {
    result.start_error = std::string("vfork: ") + std::strerror(fork_error);
    return -1;
  }
  if (child_started(report_read.get(), spec, result)) return pid;
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  std::lock_guard guard(owned_mutex);
  owned.erase(pid);
  return -1;
}

// Reads the output until the shell exited and its pipes closed (or the
// drain after its exit ended), signalling the group on stop and timeout.
// Returns when SIGKILL is due for the rest of the group, if it is.
std::optional<Clock::time_point> supervise(pid_t pid, const CommandSpec& spec, std::stop_token stop, Fd& out_read,
                                           Fd& err_read, LineReader& out, LineReader& err, CommandResult& result,
                                           Clock::time_point started) {
  std::optional<Clock::time_point> deadline;
  if (spec.timeout > std::chrono::nanoseconds::zero()) deadline = started + spec.timeout;
  std::optional<Clock::time_point> kill_at;        // SIGKILL after SIGTERM
  std::optional<Clock::time_point> drain_until;    // main process gone
  // The shell is waited for with WNOWAIT: it stays a zombie, so its PID —
  // the group's ID — cannot be reused, and kill(-pid) can never reach an
  // unrelated group. It is reaped at the end, after the last signal.
  bool out_open = true, err_open = true, reaped = false;
  auto terminate = [&] {
    if (kill_at) return;
    kill(-pid, SIGTERM);
    kill_at = Clock::now() + spec.kill_grace;
  };
  std::array<char, 8192> buffer{};
  while (!reaped || ((out_open || err_open) && Clock::now() < *drain_until)) {
    if (!reaped) {
      siginfo_t info{};
      const int waited = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if ((waited == 0 && info.si_pid == pid) || (waited < 0 && errno == ECHILD)) {
        reaped = true;  // exited (a zombie until the end)
        drain_until = Clock::now() + drain_after_exit;
        continue;
      }
      if (stop.stop_requested() && !result.stopped) {
        result.stopped = true;
        terminate();
      }
      if (deadline && Clock::now() >= *deadline && !result.timed_out) {
        result.timed_out = true;
        terminate();
      }
      if (kill_at && Clock::now() >= *kill_at) {
        kill(-pid, SIGKILL);
        kill_at = Clock::time_point::max();  // once
      }
    }
    std::array<pollfd, 2> fds{pollfd{out_open ? out_read.get() : -1, POLLIN, 0},
                              pollfd{err_open ? err_read.get() : -1, POLLIN, 0}};
    // Short waits while the process runs: waitpid, the timeout and the stop
    // token are checked between them (also once both pipes are closed).
    poll(fds.data(), fds.size(), 20);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = read(fds[i].fd, buffer.data(), buffer.size());
      if (got > 0) {
        (i == 0 ? out : err).feed(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  if (kill_at && *kill_at != Clock::time_point::max()) return kill_at;
  return std::nullopt;
}

/// The job's stdin: /dev/null, or a pipe holding `spec.input` (at most
/// max_input_bytes, below a pipe's capacity, so it is written whole now
/// and the job reads it to its end, EOF, at its own pace).
Fd open_input(const CommandSpec& spec, CommandResult& result) {
  if (!spec.input) {
    Fd null(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (null.get() < 0) result.start_error = std::string("/dev/null: ") + std::strerror(errno);
    return null;
  }
  if (spec.input->size() > max_input_bytes) {
    result.start_error = fmt::format("standard input of {} bytes, above the limit of {}", spec.input->size(), max_input_bytes);
    return Fd();
  }
  std::array<int, 2> ends{};
  if (pipe2(ends.data(), O_CLOEXEC) != 0) {
    result.start_error = std::string("pipe: ") + std::strerror(errno);
    return Fd();
  }
  Fd read_end(ends[0]), write_end(ends[1]);
  // Never blocks: a pipe may hold less than usual (pipe-user-pages-soft),
  // and nobody reads it yet.
  (void)fcntl(write_end.get(), F_SETPIPE_SZ, static_cast<int>(max_input_bytes));
  (void)fcntl(write_end.get(), F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  while (written < spec.input->size()) {
    const ssize_t n = write(write_end.get(), spec.input->data() + written, spec.input->size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result.start_error = errno == EAGAIN ? fmt::format("standard input of {} bytes does not fit in a pipe here "
                                                         "(/proc/sys/fs/pipe-user-pages-soft)", spec.input->size())
                                           : std::string("writing standard input: ") + std::strerror(errno);
      return Fd();
    }
    written += static_cast<std::size_t>(n);
  }
  return read_end;
}

}  // namespace

void set_variable(std::vector<std::string>& environment, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  std::erase_if(environment, [&](const std::string& entry) { return entry.starts_with(prefix); });
  environment.push_back(prefix + value);
}

CommandResult run_command(const CommandSpec& spec, std::stop_token stop, const OutputSink& sink) {
  CommandResult result;
  const auto started = Clock::now();
  std::array<int, 2> out_pipe{}, err_pipe{};
  if (pipe2(out_pipe.data(), O_CLOEXEC) != 0) {
    result.start_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    result.start_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
  Fd input = open_input(spec, result);
  if (input.get() < 0) return result;
  const pid_t pid = spawn(spec, input, out_write, err_write, result);
  input.reset();
  out_write.reset();
  err_write.reset();
  if (pid < 0) return result;
  result.started = true;
  LineReader out(std::string_view("stdout"), spec, result, sink), err(std::string_view("stderr"), spec, result, sink);
  // Ended by us (timeout or stop) but the group may outlive its shell: the
  // rest of it gets SIGKILL when the grace ends.
  if (const auto kill_at = supervise(pid, spec, stop, out_read, err_read, out, err, result, started)) {
    while (Clock::now() < *kill_at && group_has_others(pid)) poll(nullptr, 0, 20);
    kill(-pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard guard(owned_mutex);
    owned.erase(pid);
  }
  out.finish();
  err.finish();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.duration = Clock::now() - started;
  return result;
}

std::size_t reap_orphans() {
  const pid_t self = getpid();
  std::vector<pid_t> zombies;
  for_each_process([&](const ProcessStat& process) {
    if (process.parent == self && process.state == 'Z') zombies.push_back(process.pid);
    return true;
  });
  std::size_t reaped = 0;
  std::lock_guard guard(owned_mutex);  // a run's shell is reaped by its run
  for (const pid_t zombie : zombies) {
    if (!owned.contains(zombie) && waitpid(zombie, nullptr, WNOHANG) == zombie) ++reaped;
  }
  return reaped;
}

}  // namespace fleetcron::daemon
