// NATS failover load program: three candidate processes campaign for one
// key in a bucket with a 10 s TTL (the reference's smallest); it measures
//  1. graceful handover: SIGTERM to the leader (it stops, which resigns)
//     until another process announces leadership (on_won);
//  2. crash failover: SIGKILL to the leader until another announces.
// Times come from CLOCK_MONOTONIC, shared by all processes.
// Usage: nats_failover NATS_URL [rounds=1]
// (The candidates are this program again: nats_failover --candidate URL BUCKET NAME.)
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fleetcron/nats/coordination.h"

namespace {

using namespace std::chrono;
using namespace fleetcron;

std::int64_t monotonic_ns() { return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count(); }

std::shared_ptr<nats::Connection> connect(const std::string& url) {
  nats::ConnectionOptions options;
  options.servers = {url};
  return nats::Connection::connect(options);
}

int candidate(const std::string& url, const std::string& bucket_name, const std::string& name) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // taken by sigwait below, in this thread only
  auto connection = connect(url);
  nats::ElectionOptions options;
  options.startup_splay = milliseconds{0};
  options.on_won = [] {
    std::printf("won %lld\n", static_cast<long long>(monotonic_ns()));
    std::fflush(stdout);
  };
  nats::Election election(name, "failover", connection->bucket(bucket_name), options);
  std::thread runner([&] { election.start(); });
  int signal = 0;
  sigwait(&term, &signal);
  election.stop();  // a leader resigns
  runner.join();
  return 0;
}

struct Child {
  pid_t pid;
  int out;  // read end of its stdout
  std::string buffer;
};

Child spawn(const char* self, const std::string& url, const std::string& bucket, const std::string& name) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    execl(self, self, "--candidate", url.c_str(), bucket.c_str(), name.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  return {pid, pipe_fds[0], {}};
}

/// Waits until some child prints "won T"; returns its index and T.
std::pair<std::size_t, std::int64_t> next_winner(std::vector<Child>& children, seconds limit) {
  const auto deadline = steady_clock::now() + limit;
  while (steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (const auto& child : children) fds.push_back({child.out, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 0; i < children.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      char chunk[256];
      const ssize_t got = read(children[i].out, chunk, sizeof chunk);
      if (got <= 0) continue;
      children[i].buffer.append(chunk, static_cast<std::size_t>(got));
      const auto newline = children[i].buffer.find('\n');
      if (newline == std::string::npos) continue;
      const std::string line = children[i].buffer.substr(0, newline);
      children[i].buffer.erase(0, newline + 1);
      if (line.rfind("won ", 0) == 0) return {i, std::stoll(line.substr(4))};
    }
  }
  throw std::runtime_error("no leader announced in time");
}

int coordinator(const char* self, const std::string& url, int rounds) {
  auto connection = connect(url);
  const std::string bucket = "FAILOVER_" + std::to_string(getpid());
  (void)connection->bucket(nats::BucketConfig{.name = bucket, .ttl = seconds{10}});
  std::vector<Child> children;
  int next_name = 0;
  for (int i = 0; i < 3; ++i) children.push_back(spawn(self, url, bucket, "candidate-" + std::to_string(next_name++)));
  std::printf("bucket TTL 10s, campaign interval 7.5s, 3 candidate processes\n");
  const std::int64_t started = monotonic_ns();
  auto [leader, won_at] = next_winner(children, seconds{60});
  std::printf("first leader announced after %.1f ms (one campaign interval after its win)\n",
              static_cast<double>(won_at - started) / 1e6);
  for (int round = 1; round <= rounds; ++round) {
    // Graceful: SIGTERM; the leader resigns as it stops.
    const std::int64_t stopped = monotonic_ns();
    kill(children[leader].pid, SIGTERM);
    auto [next, next_won] = next_winner(children, seconds{60});
    std::printf("round %d: graceful handover (SIGTERM to the leader -> new leader announced): %.1f ms\n", round,
                static_cast<double>(next_won - stopped) / 1e6);
    waitpid(children[leader].pid, nullptr, 0);
    close(children[leader].out);
    children.erase(children.begin() + static_cast<std::ptrdiff_t>(leader));
    if (next > leader) --next;
    children.push_back(spawn(self, url, bucket, "candidate-" + std::to_string(next_name++)));
    // Crash: SIGKILL; the others wait for the key's TTL.
    const std::int64_t killed = monotonic_ns();
    kill(children[next].pid, SIGKILL);
    waitpid(children[next].pid, nullptr, 0);
    close(children[next].out);
    children.erase(children.begin() + static_cast<std::ptrdiff_t>(next));
    auto [after_crash, crash_won] = next_winner(children, seconds{60});
    std::printf("round %d: crash failover (SIGKILL to the leader -> new leader announced): %.1f ms "
                "(bound: TTL + one campaign interval = 17500 ms)\n",
                round, static_cast<double>(crash_won - killed) / 1e6);
    leader = after_crash;
    children.push_back(spawn(self, url, bucket, "candidate-" + std::to_string(next_name++)));
  }
  for (auto& child : children) {
    kill(child.pid, SIGTERM);
    waitpid(child.pid, nullptr, 0);
    close(child.out);
  }
  connection->delete_bucket(bucket);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::strcmp(argv[1], "--candidate") == 0) return candidate(argv[2], argv[3], argv[4]);
    if (argc < 2) {
      std::fprintf(stderr, "usage: nats_failover NATS_URL [rounds=1]\n");
      return 2;
    }
    return coordinator(argv[0], argv[1], argc > 2 ? std::atoi(argv[2]) : 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nats_failover: %s\n", e.what());
    return 1;
  }
}
