// Test support: a redis-server child process on a free loopback port,
// stopped by PID. A server that cannot start throws: the test fails.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/child_process.h"  // free_port

namespace fleetcron::test {

class RedisServer {
 public:
  struct Options {
    std::string password;                 // requirepass
    std::vector<std::string> extra_args;  // more redis-server options
    /// Non-zero: a Sentinel (redis-server --sentinel) monitoring the
    /// primary on 127.0.0.1 at this port as sentinel_master, quorum 2,
    /// down after 1 s, failover timeout 3 s; its config file (which it
    /// rewrites) lives in /tmp beside its log.
    std::uint16_t sentinel_of = 0;
    std::string sentinel_master = "fleet";
  };
  explicit RedisServer(Options options);
  RedisServer() : RedisServer(Options{}) {}
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Starts again on the same port (after stop()); throws if it cannot.
  void start();
  /// SIGTERM, then SIGKILL after 5 s; waits for the process.
  void stop();
  void pause();   // SIGSTOP
  void resume();  // SIGCONT

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// redis://127.0.0.1:PORT/0 (without the password).
  [[nodiscard]] std::string uri() const;

 private:
  void launch();
  bool ready();

  Options options_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool restarting_ = false;
  std::string log_path_;
};

/// The URI of the server shared by the tests of this process: the one in
/// $FLEETCRON_TEST_REDIS_URL (started by scripts/test.sh), else one started
/// on first use and stopped at exit.
std::string shared_redis_uri();

/// A key prefix unique to this test and run, so tests sharing a server
/// never see each other's keys.
std::string unique_prefix();

/// Writes the claim store's reset epoch record for `claim_prefix` as if the
/// store had run without a reset since 1970, so that claims of fires in the
/// past are not refused as store-reset. For tests that are not about
/// resets; `uri` is the server's (its replication ID goes in the record).
void seed_store_epoch(const std::string& uri, const std::string& claim_prefix);

}  // namespace fleetcron::test
