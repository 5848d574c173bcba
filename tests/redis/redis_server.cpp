#include "redis_server.h"

#include "fleetcron/redis/client.h"
#include "redis/commands.h"
#include "support/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace fleetcron::test {

RedisServer::RedisServer(Options options) : options_(std::move(options)) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    launch();
    if (ready()) return;
    stop();
  }
  throw std::runtime_error("redis-server did not start (see " + log_path_ + ")");
}

RedisServer::~RedisServer() {
  resume();
  stop();
}

void RedisServer::launch() {
  log_path_ = "/tmp/fleetcron-test-redis-" + std::to_string(port_) + ".log";
  if (options_.sentinel_of != 0) {
    const std::string config = "/tmp/fleetcron-test-sentinel-" + std::to_string(port_) + ".conf";
    if (!restarting_) {  // a restart keeps what the sentinel learnt
      std::ofstream(config) << "sentinel monitor " << options_.sentinel_master << " 127.0.0.1 " << options_.sentinel_of
                            << " 2\nsentinel down-after-milliseconds " << options_.sentinel_master
                            << " 1000\nsentinel failover-timeout " << options_.sentinel_master << " 3000\n";
    }
    pid_ = spawn_process({"redis-server", config, "--sentinel", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                          "--logfile", log_path_, "--dir", "/tmp"},
                         "");
    return;
  }
  std::vector<std::string> args{"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", log_path_,
                                // A replica's full sync writes the RDB to disk: never into a shared directory,
                                // where a later server would load it at its start.
                                "--dir", "/tmp", "--dbfilename", "fleetcron-test-redis-" + std::to_string(port_) + ".rdb"};
  if (!options_.password.empty()) {
    args.emplace_back("--requirepass");
    args.push_back(options_.password);
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  pid_ = spawn_process(args, "");  // it writes its own log file
}

bool RedisServer::ready() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (std::chrono::steady_clock::now() < deadline) {
    if (has_exited(pid_)) {
      pid_ = -1;
      return false;
    }
    timeval tv{0, 200'000};
    redisContext* context = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (context != nullptr && context->err == 0) {
      if (!options_.password.empty()) {
        freeReplyObject(redisCommand(context, "AUTH %s", options_.password.c_str()));
      }
      auto* reply = static_cast<redisReply*>(redisCommand(context, "INFO server"));
      bool ours = false;
      if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
        // The server on this port must be the one we started.
        ours = std::string(reply->str, reply->len).find("process_id:" + std::to_string(pid_) + "\r") !=
               std::string::npos;
      }
      freeReplyObject(reply);
      redisFree(context);
      if (ours) return true;
    } else if (context != nullptr) {
      redisFree(context);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});  // polling a child process, not test timing
  }
  return false;
}

void RedisServer::start() {
  if (pid_ > 0) return;
  restarting_ = true;
  launch();
  if (!ready()) throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
}

void RedisServer::stop() {
  stop_process(pid_, std::chrono::seconds{5});
  pid_ = -1;
}

void RedisServer::pause() {
  pause_process(pid_);
}

void RedisServer::resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

std::string RedisServer::uri() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

std::string shared_redis_uri() {
  if (const char* given = std::getenv("FLEETCRON_TEST_REDIS_URL"); given != nullptr && *given != '\0') return given;
  static RedisServer server;  // stopped by its destructor at exit
  return server.uri();
}

std::string unique_prefix() {
  static std::atomic<int> counter{0};
  static const auto run = std::random_device{}();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  return "t:" + name + ":" + std::to_string(run) + ":" + std::to_string(counter++) + ":";
}

void seed_store_epoch(const std::string& uri, const std::string& claim_prefix) {
  redis::Client client(redis::parse_uri(uri).connection);
  const std::string info = client.impl().command({"INFO", "replication"}).text;
  const auto at = info.find("master_replid:");
  if (at == std::string::npos) throw std::runtime_error("INFO replication has no master_replid");
  const auto begin = at + std::string_view("master_replid:").size();
  const std::string replid = info.substr(begin, info.find_first_of("\r\n", begin) - begin);
  const auto reply = client.impl().command({"SET", claim_prefix + "epoch", "1 " + replid});
  if (reply.text != "OK") throw std::runtime_error("SET epoch: " + reply.text);
}

}  // namespace fleetcron::test
