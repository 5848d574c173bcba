#include "daemon/process_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <dirent.h>
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
#include <fstream>
#include <iterator>
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

// Calls `visit` for each process in /proc (pid, state, parent, group)
// until it returns false.
void for_each_process(const std::function<bool(const ProcessStat&)>& visit) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long id = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || id <= 0) continue;
    std::ifstream file(fmt::format("/proc/{}/stat", id));
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
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

// Spawns `spec`'s shell in a process group of its own with stdout and
// stderr on the pipes' write ends; registers it as owned. Returns its pid,
// or -1 with result.start_error set.
pid_t spawn(const CommandSpec& spec, const Fd& out_write, const Fd& err_write, CommandResult& result) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  // Nothing else of the daemon reaches the job: hiredis, nats.c and the
  // metrics server open sockets without O_CLOEXEC, and a job's background
  // child must not keep the daemon's port or connections open.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t no_signals, all_signals;
  sigemptyset(&no_signals);
  sigfillset(&all_signals);
  // Its own process group (so a timeout reaches its children), no blocked
  // signals and default dispositions, whatever the daemon's threads have.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setsigdefault(&attributes, &all_signals);
  std::string shell = spec.shell, dash_c = "-c", command = spec.command;
  std::vector<char*> argv{shell.data(), dash_c.data(), command.data(), nullptr};
  std::vector<std::string> environment = spec.environment;
  std::vector<char*> envp;
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  std::unique_lock owning(owned_mutex);  // spawned and owned at once: reap_orphans() never takes it
  const int spawn_error = posix_spawn(&pid, shell.c_str(), &actions, &attributes, argv.data(), envp.data());
  if (spawn_error == 0) owned.insert(pid);
  owning.unlock();
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) {
    result.start_error = fmt::format("{}: {}", spec.shell, std::strerror(spawn_error));
    return -1;
  }
  return pid;
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

}  // namespace

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
  const pid_t pid = spawn(spec, out_write, err_write, result);
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
