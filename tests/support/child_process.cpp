#include "support/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace fleetcron::test {

pid_t spawn_process(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork() failed");
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    const int out = log_path.empty() ? null : open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(null, 0);
    dup2(out, 1);
    dup2(out, 2);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

bool has_exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

void stop_process(pid_t pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  kill(pid, SIGCONT);
  kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!has_exited(pid)) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill_process(pid);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});  // polling a child process, not test timing
  }
}

void kill_process(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

namespace {

/// Whether every thread of `pid` is stopped ('T' in /proc/PID/task/*/stat).
bool all_threads_stopped(pid_t pid) {
  std::error_code error;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  bool any = false;
  for (std::filesystem::directory_iterator it(tasks, error), end; !error && it != end; it.increment(error)) {
    std::ifstream stat(it->path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // the thread ended
    const std::size_t close = line.rfind(')');  // the name may hold anything: the state follows its last ')'
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    const char state = line[close + 2];
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any;
}

}  // namespace

void pause_process(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGSTOP);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!all_threads_stopped(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
}

std::uint16_t free_port() {
  static std::mt19937 random{std::random_device{}()};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto port = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(10000, 32000)(random));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("free_port: socket() failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;  // NOLINT: sockets API
    close(fd);
    if (free) return port;
  }
  throw std::runtime_error("free_port: no free port in 10000..32000");
}

}  // namespace fleetcron::test
