// Test support: a nats-server child process with JetStream, on a free
// loopback port, with its own store directory; stopped by PID. A server
// that cannot start throws: the test fails.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fleetcron::test {

class NatsServer {
 public:
  struct Options {
    std::string user, password;  // --user/--pass
    std::string config;          // nats-server configuration text (-c), e.g. JetStream limits
  };
  explicit NatsServer(Options options);
  NatsServer() : NatsServer(Options{}) {}
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  /// Starts again on the same port and store (after stop()).
  void start();
  /// SIGTERM, then SIGKILL after 10 s; waits for the process.
  void stop();
  void kill_now();  // SIGKILL
  void pause();     // SIGSTOP
  void resume();    // SIGCONT

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const;

 private:
  void launch(bool any_port);
  Options options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

/// Three nats-server processes with JetStream (n0, n1, n2), routed into one
/// cluster on free loopback ports, each with its own store; a node stopped
/// and started again rejoins on the same ports. JetStream answers once the
/// nodes elected their meta leader, a moment after the constructor returns:
/// a test retries its first bucket creation.
class NatsCluster {
 public:
  NatsCluster();
  [[nodiscard]] NatsServer& node(std::size_t i) { return *nodes_.at(i); }
  /// Every node's URL, starting with node `first`.
  [[nodiscard]] std::vector<std::string> urls(std::size_t first = 0) const;

 private:
  std::vector<std::unique_ptr<NatsServer>> nodes_;
};

/// The URL of the server shared by this process's tests: the one in
/// $FLEETCRON_TEST_NATS_URL (started by scripts/test.sh), else one started
/// on first use and stopped at exit.
std::string shared_nats_url();

/// A bucket name unique to this test and run.
std::string unique_bucket();

}  // namespace fleetcron::test
