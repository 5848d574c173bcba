// Client against real redis-server processes: commands, pipelines, scripts,
// the pool, and every failure: refused password, unreachable port, slow
// server, restart, NOSCRIPT.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <atomic>
#include <chrono>
#include <thread>

#include "fleetcron/redis/client.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/pace_probe.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

std::shared_ptr<Client> connect(const std::string& uri, std::chrono::milliseconds timeout = 1000ms) {
  ClientOptions base;
  base.request_timeout = timeout;
  base.connect_timeout = timeout;
  return std::make_shared<Client>(parse_uri(uri, base).connection);
}

TEST(RedisClient, CommandsRepliesAndPipelines) {
  auto client = connect(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "k";
  EXPECT_EQ(client->impl().command({"SET", key, std::string("bin\0ary", 7)}).text, "OK");
  EXPECT_EQ(client->impl().command({"GET", key}).text, std::string("bin\0ary", 7));
  EXPECT_TRUE(client->impl().command({"GET", key + "missing"}).is_nil());
  EXPECT_EQ(client->impl().command({"INCRBY", key + "n", "41"}).integer, 41);
  const Reply wrong = client->impl().command({"INCR", key});
  EXPECT_TRUE(wrong.is_error());
  EXPECT_TRUE(wrong.is_error("ERR"));
  EXPECT_FALSE(wrong.is_error("NOSCRIPT"));

  std::vector<std::vector<std::string>> commands;
  for (int i = 0; i < 1000; ++i) commands.push_back({"SET", key + std::to_string(i), std::to_string(i), "NX"});
  const auto replies = client->impl().pipeline(commands);
  ASSERT_EQ(replies.size(), 1000u);
  for (const auto& reply : replies) EXPECT_EQ(reply.text, "OK");
  EXPECT_EQ(client->impl().command({"GET", key + "999"}).text, "999");
  const Reply array = client->impl().command({"MGET", key + "1", key + "missing"});
  ASSERT_EQ(array.type, Reply::Type::array);
  EXPECT_EQ(array.elements[0].text, "1");
  EXPECT_TRUE(array.elements[1].is_nil());
  EXPECT_GE(client->stats().commands, 1006u);
  EXPECT_EQ(client->stats().failures, 0u);
}

TEST(RedisClient, PoolIsSafeUnderConcurrentCallers) {
  ClientOptions options = parse_uri(test::shared_redis_uri()).connection;
  options.pool_size = 3;
  Client client(options);
  const std::string key = test::unique_prefix() + "counter";
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) EXPECT_EQ(client.impl().command({"INCR", key}).type, Reply::Type::integer);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(client.impl().command({"GET", key}).text, "1600");
  EXPECT_LE(client.stats().connects, 3u);  // never more connections than the pool allows
}

TEST(RedisClient, ScriptsRunBySha1AndSurviveScriptFlush) {
  RedisServer server;  // private: SCRIPT FLUSH would disturb other tests
  auto client = connect(server.uri());
  const Script script("return {KEYS[1], ARGV[1]}");
  const std::vector<std::string> keys{"a"}, args{"b"};
  EXPECT_EQ(client->impl().eval(script, keys, args).elements[1].text, "b");
  EXPECT_EQ(client->impl().command({"SCRIPT", "FLUSH"}).text, "OK");
  const Reply again = client->impl().eval(script, keys, args);  // NOSCRIPT, then EVAL
  ASSERT_EQ(again.type, Reply::Type::array) << again.text;
  EXPECT_EQ(again.elements[0].text, "a");
  EXPECT_EQ(client->impl().command({"SCRIPT", "FLUSH"}).text, "OK");
  const std::vector<std::vector<std::string>> calls{{"k1", "v1"}, {"k2", "v2"}, {"k3", "v3"}};
  const std::vector<std::size_t> key_counts{1, 1, 1};
  const auto replies = client->impl().eval_pipeline(script, key_counts, calls);
  ASSERT_EQ(replies.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(replies[i].elements[1].text, calls[i][1]);
}

TEST(RedisClient, WrongPasswordIsAnAuthErrorThatNeverShowsThePassword) {
  RedisServer server(RedisServer::Options{.password = "right-horse-battery", .extra_args = {}});
  auto client = connect("redis://:wrong-staple-guess@127.0.0.1:" + std::to_string(server.port()));
  try {
    client->ping();
    FAIL() << "a wrong password was accepted";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind(), BackendError::Kind::auth);
    const std::string message = e.what();
    EXPECT_NE(message.find("AUTH refused"), std::string::npos) << message;
    EXPECT_NE(message.find(":***@"), std::string::npos) << message;
    EXPECT_EQ(message.find("wrong-staple-guess"), std::string::npos) << message;
    EXPECT_EQ(message.find("right-horse-battery"), std::string::npos) << message;
  }
  // No password at all: the server answers NOAUTH, a reply, not a hang.
  auto anonymous = connect(server.uri());
  EXPECT_TRUE(anonymous->impl().command({"GET", "x"}).is_error("NOAUTH"));
  auto good = connect("redis://:right-horse-battery@127.0.0.1:" + std::to_string(server.port()));
  EXPECT_NO_THROW(good->ping());
}

// Regression: keep-alive was enabled on Unix sockets too, which hiredis
// answers with EOPNOTSUPP, leaving the connection in error: every command
// over unix:… failed ("reading a reply: Operation not supported").
TEST(RedisClient, UnixSocketsCarryCommands) {
  const std::string socket = "/tmp/fleetcron-test-" + std::to_string(::getpid()) + "-" + std::to_string(test::free_port()) + ".sock";
  RedisServer server(RedisServer::Options{.password = "", .extra_args = {"--unixsocket", socket}});
  auto client = connect("unix:" + socket);
  EXPECT_EQ(client->impl().command({"SET", "k", "v"}).text, "OK");
  EXPECT_EQ(client->impl().command({"GET", "k"}).text, "v");
  std::remove(socket.c_str());
}

TEST(RedisClient, AclUserAndSelect) {
  RedisServer server;
  auto admin = connect(server.uri());
  ASSERT_EQ(admin->impl().command({"ACL", "SETUSER", "cron", "on", ">cron-pass", "~*", "+@all"}).text, "OK");
  auto user = connect("redis://cron:cron-pass@127.0.0.1:" + std::to_string(server.port()) + "/5");
  ASSERT_EQ(user->impl().command({"SET", "in-db-5", "1"}).text, "OK");
  EXPECT_TRUE(admin->impl().command({"GET", "in-db-5"}).is_nil());  // admin is on db 0
  auto wrong_user = connect("redis://cron:nope@127.0.0.1:" + std::to_string(server.port()));
  try {
    wrong_user->ping();
    FAIL() << "wrong ACL password accepted";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind(), BackendError::Kind::auth);
    EXPECT_NE(std::string(e.what()).find("as user cron"), std::string::npos) << e.what();
  }
  auto bad_db = connect("redis://127.0.0.1:" + std::to_string(server.port()) + "/99");
  try {
    bad_db->ping();
    FAIL() << "SELECT 99 accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("SELECT 99 refused"), std::string::npos) << e.what();
  }
}

TEST(RedisClient, UnreachablePortFailsFastAndBacksOff) {
  const auto port = test::free_port();  // nothing listens there
  auto client = connect("redis://127.0.0.1:" + std::to_string(port), 500ms);
  const test::PaceProbe started;
  try {
    client->ping();
    FAIL() << "connected to a closed port";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind(), BackendError::Kind::connect);
    EXPECT_NE(std::string(e.what()).find("connect failed"), std::string::npos) << e.what();
  }
  try {
    client->ping();  // within the backoff: fails at once, says when it retries
    FAIL() << "connected to a closed port";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("reconnecting in"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(started.within(500ms)) << started.describe(500ms);
  EXPECT_EQ(client->stats().connect_failures, 1u);  // the second call did not even try
}

TEST(RedisClient, SlowServerTimesOutWithinTheCommandTimeoutAndRecovers) {
  RedisServer server;
  auto client = connect(server.uri(), 300ms);
  client->ping();
  server.pause();  // SIGSTOP: the server accepts nothing and answers nothing
  const test::PaceProbe started;
  try {
    (void)client->impl().command({"GET", "k"});
    FAIL() << "no timeout";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind(), BackendError::Kind::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("no reply within the request timeout"), std::string::npos) << e.what();
  }
  EXPECT_GE(started.elapsed(), 250ms);
  EXPECT_TRUE(started.within(1000ms)) << started.describe(1000ms);
  server.resume();
  // The timed-out connection was dropped; a new one keeps the 300 ms bound.
  EXPECT_NO_THROW(client->ping());
  server.pause();
  const test::PaceProbe again;
  EXPECT_THROW((void)client->impl().command({"GET", "k"}), BackendError);
  EXPECT_TRUE(again.within(1000ms)) << again.describe(1000ms);
  server.resume();
}

TEST(RedisClient, ReconnectsAfterAServerRestart) {
  RedisServer server;
  ClientOptions options = parse_uri(server.uri()).connection;
  options.reconnect_backoff_initial = 1ms;
  options.reconnect_backoff_max = 1ms;
  Client client(options);
  client.ping();
  server.stop();
  EXPECT_THROW(client.ping(), BackendError);
  server.start();
  // The first call after the restart may find its pooled connection dead
  // (that call fails, the connection is dropped); a later one reconnects.
  bool recovered = false;
  for (int attempt = 0; attempt < 100 && !recovered; ++attempt) {
    try {
      client.ping();
      recovered = true;
    } catch (const BackendError&) {
      std::this_thread::sleep_for(2ms);  // past the 1 ms backoff
    }
  }
  EXPECT_TRUE(recovered);
  EXPECT_GE(client.stats().connects, 2u);
}

}  // namespace
}  // namespace fleetcron::redis
