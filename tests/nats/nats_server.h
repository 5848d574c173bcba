// Test support: a nats-server child process with JetStream, on a free
// loopback port, with its own store directory; stopped by PID. A server
// that cannot start throws: the test fails.
#pragma once

#include <sys/types.h>

#include <cstdint>
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

/// The URL of the server shared by this process's tests: the one in
/// $FLEETCRON_TEST_NATS_URL (started by scripts/test.sh), else one started
/// on first use and stopped at exit.
std::string shared_nats_url();

/// A bucket name unique to this test and run.
std::string unique_bucket();

}  // namespace fleetcron::test
