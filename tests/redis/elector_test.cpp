// redis::Elector against a real redis-server.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "fleetcron/redis/elector.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/eventually.h"
#include "support/pace_probe.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;
using test::eventually;

std::shared_ptr<Client> client_for(const std::string& uri, std::chrono::milliseconds timeout = 1000ms) {
  ClientOptions base;
  base.request_timeout = timeout;
  base.connect_timeout = timeout;
  return std::make_shared<Client>(parse_uri(uri, base).connection);
}

TEST(RedisElector, OptionsAndIdentity) {
  auto client = client_for(test::shared_redis_uri());
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
  EXPECT_EQ(message([] { Elector e(nullptr); }), "redis::Elector: client is null");
  EXPECT_EQ(message([&] { Elector e(client, {.leader_key = "  \t"}); }), "redis::ElectorOptions.leader_key: empty");
  EXPECT_EQ(message([&] { Elector e(client, {.lease = {.lease_ttl = 0ms}}); }),
            "redis::ElectorOptions.lease.lease_ttl: 0s is below the minimum of 1ms");
  EXPECT_EQ(message([&] { Elector e(client, {.lease = {.lease_ttl = 1s, .renew_margin = 1s}}); }),
            "redis::ElectorOptions.lease.renew_margin: 1s is outside 0 .. lease_ttl 1s");
  Elector trimmed(client, {.leader_key = " jobs:leader "});
  EXPECT_EQ(trimmed.options().leader_key, "jobs:leader");
  EXPECT_EQ(trimmed.options().term_key, "jobs:leader:term");
  Elector defaults(client);
  EXPECT_EQ(defaults.options().leader_key, "cron:leader");
  EXPECT_EQ(defaults.options().lease.lease_ttl, 30s);
  EXPECT_EQ(defaults.identity().size(), 32u);
  EXPECT_TRUE(std::all_of(defaults.identity().begin(), defaults.identity().end(),
                          [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }));
  EXPECT_NE(defaults.identity(), trimmed.identity());
}

TEST(RedisElector, OneLeaderAmongThreeThenResignHandsOver) {
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  std::vector<std::unique_ptr<Elector>> electors;
  for (int i = 0; i < 3; ++i) electors.push_back(std::make_unique<Elector>(client, ElectorOptions{.leader_key = key}));
  auto leaders = [&] {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < electors.size(); ++i) {
      if (electors[i]->is_leader().status == Leadership::Status::leader) out.push_back(i);
    }
    return out;
  };
  const auto first = leaders();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first, leaders());  // renewals keep it
  EXPECT_EQ(client->impl().command({"GET", key}).text, electors[first[0]]->identity());
  const auto term = electors[first[0]]->is_leader().term;
  std::vector<std::uint64_t> lost;
  electors[first[0]]->on_leadership_lost([&](std::uint64_t t) { lost.push_back(t); });
  electors[first[0]]->resign();
  EXPECT_EQ(lost, std::vector<std::uint64_t>{term});
  EXPECT_TRUE(client->impl().command({"GET", key}).is_nil());
  const std::size_t next = (first[0] + 1) % 3;
  const auto taken = electors[next]->is_leader();  // its next check
  ASSERT_EQ(taken.status, Leadership::Status::leader);
  EXPECT_GT(taken.term, term);
  EXPECT_EQ(leaders(), std::vector<std::size_t>{next});
}

TEST(RedisElector, AnotherLeadsWithinOneTtlAfterTheLeaderStopsRenewing) {
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  Elector a(client, {.leader_key = key, .lease = {.lease_ttl = 300ms}});
  Elector b(client, {.leader_key = key, .lease = {.lease_ttl = 300ms}});
  const auto a_term = a.is_leader();
  ASSERT_EQ(a_term.status, Leadership::Status::leader);
  const test::PaceProbe stopped_renewing;
  EXPECT_EQ(b.is_leader().status, Leadership::Status::follower);
  ASSERT_TRUE(eventually([&] { return b.is_leader().status == Leadership::Status::leader; }, 2000ms));
  EXPECT_TRUE(stopped_renewing.within(300ms + 200ms)) << stopped_renewing.describe(300ms + 200ms);  // one TTL, plus polling
  EXPECT_GT(b.state().term, a_term.term);
  EXPECT_EQ(a.is_leader().status, Leadership::Status::follower);
}

TEST(RedisElector, AForeignIdentityInTheKeyMakesEveryElectorAFollower) {
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  // A libtnb/cron replica holds the lease: its identity, its TTL.
  ASSERT_EQ(client->impl().command({"SET", key, "0123456789abcdef0123456789abcdef", "PX", "30000"}).text, "OK");
  for (int i = 0; i < 3; ++i) {
    Elector e(client, {.leader_key = key});
    EXPECT_EQ(e.is_leader().status, Leadership::Status::follower);
    e.resign();  // not ours: must not delete it
  }
  EXPECT_EQ(client->impl().command({"GET", key}).text, "0123456789abcdef0123456789abcdef");
}

TEST(RedisElector, KeepAliveHoldsLeadershipWithoutCalls) {
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  Elector a(client, {.leader_key = key, .lease = {.lease_ttl = 300ms, .keep_alive = true}});
  ASSERT_TRUE(eventually([&] { return a.state().leader; }, 2000ms));
  const auto term = a.state().term;
  Elector b(client, {.leader_key = key, .lease = {.lease_ttl = 300ms}});
  // Three TTLs without a single is_leader() call on a: the thread renews.
  const auto until = std::chrono::steady_clock::now() + 900ms;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(b.is_leader().status, Leadership::Status::follower);
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(a.is_leader().term, term);  // answered from memory
  a.resign();
  EXPECT_EQ(b.is_leader().status, Leadership::Status::leader);
}

TEST(RedisElector, ALeaderThatCannotRenewDemotesItselfAtItsLocalDeadline) {
  test::RedisServer server;
  auto client = client_for(server.uri(), 2000ms);  // a command timeout longer than the lease
  Elector a(client, {.leader_key = "leader", .lease = {.lease_ttl = 500ms, .keep_alive = true, .renew_margin = 100ms}});
  std::atomic<std::uint64_t> lost{0};
  a.on_leadership_lost([&](std::uint64_t term) { lost = term; });
  ASSERT_TRUE(eventually([&] { return a.state().leader; }, 2000ms));
  const auto term = a.state().term;
  server.pause();  // the renewal round trip now hangs
  const test::PaceProbe paused;
  ASSERT_TRUE(eventually([&] { return a.is_leader().status != Leadership::Status::leader; }, 3000ms));
  EXPECT_TRUE(paused.within(500ms)) << paused.describe(500ms);  // TTL - margin after the last renewal, not 2 s
  EXPECT_EQ(lost.load(), term);
  server.resume();
  // Back: it takes the lease again, with a new term.
  ASSERT_TRUE(eventually([&] { return a.is_leader().status == Leadership::Status::leader; }, 5000ms));
  EXPECT_GT(a.state().term, term);
}

TEST(RedisElector, ALargeRenewMarginStillRenewsBeforeTheDeadline) {
  // Review finding: with renew_margin >= 2/3 TTL the keep-alive woke exactly
  // at the local deadline and took a new term every cycle.
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  Elector a(client, {.leader_key = key, .lease = {.lease_ttl = 300ms, .keep_alive = true, .renew_margin = 250ms}});
  std::atomic<int> lost{0};
  a.on_leadership_lost([&](std::uint64_t) { ++lost; });
  ASSERT_TRUE(eventually([&] { return a.state().leader; }, 2000ms));
  const auto term = a.state().term;
  const auto until = std::chrono::steady_clock::now() + 600ms;  // two TTLs
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(a.state().term, term);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(lost.load(), 0);
}

TEST(RedisElector, ACallbackMayCallBackIntoTheElector) {
  // Review finding: the lost callback ran under the campaign lock, so a
  // callback calling is_leader() or resign() deadlocked.
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  Elector a(client, {.leader_key = key});
  std::atomic<bool> called{false};
  a.on_leadership_lost([&](std::uint64_t) {
    (void)a.is_leader();
    a.resign();
    called = true;
  });
  ASSERT_EQ(a.is_leader().status, Leadership::Status::leader);
  ASSERT_EQ(client->impl().command({"SET", key, "someone-else"}).text, "OK");  // taken over
  EXPECT_EQ(a.is_leader().status, Leadership::Status::follower);
  EXPECT_TRUE(called.load());
}

TEST(RedisElector, RefusedScriptLoadIsAnErrorAnswerNotAnException) {
  // Review finding: an error reply to SCRIPT LOAD (NOAUTH, LOADING, NOPERM)
  // threw out of is_leader() and, on the keep-alive thread, terminated.
  test::RedisServer server(test::RedisServer::Options{.password = "p4ss", .extra_args = {}});
  auto client = client_for(server.uri());  // no password
  Elector seed_mode(client, {.leader_key = "l"});
  const auto answer = seed_mode.is_leader();
  EXPECT_EQ(answer.status, Leadership::Status::error);
  EXPECT_NE(answer.error.find("NOAUTH"), std::string::npos) << answer.error;
  Elector keep_alive(client, {.leader_key = "l", .lease = {.lease_ttl = 300ms, .keep_alive = true}});
  ASSERT_TRUE(eventually([&] { return !keep_alive.state().last_error.empty(); }, 2000ms));
  EXPECT_NE(keep_alive.state().last_error.find("NOAUTH"), std::string::npos);
}

TEST(RedisElector, UnreachableRedisIsAnElectionErrorNotAHang) {
  auto client = client_for("redis://127.0.0.1:" + std::to_string(test::free_port()), 300ms);
  Elector e(client);
  const auto answer = e.is_leader();
  EXPECT_EQ(answer.status, Leadership::Status::error);
  EXPECT_NE(answer.error.find("connect failed"), std::string::npos) << answer.error;
  EXPECT_FALSE(e.state().leader);
  EXPECT_EQ(e.state().last_error, answer.error);
}

// Review: a leader whose scheduler was wedged (stderr blocked) kept renewing
// from its keep-alive thread, and nothing ran anywhere.
TEST(RedisElector, AWedgedSchedulerStopsRenewingAndAnotherLeads) {
  auto client = client_for(test::shared_redis_uri());
  const std::string key = test::unique_prefix() + "leader";
  Elector a(client, {.leader_key = key, .lease = {.lease_ttl = 1500ms, .keep_alive = true}});
  std::atomic<bool> alive{true};
  a.set_liveness([&] { return alive.load(); });
  ASSERT_TRUE(eventually([&] { return a.is_leader().status == Leadership::Status::leader; }, 5s));
  Elector b(client, {.leader_key = key, .lease = {.lease_ttl = 1500ms, .keep_alive = true}});
  std::atomic<bool> b_stalled{false};
  b.set_liveness([&] { return !b_stalled.load(); });
  alive = false;  // a's loop stops making progress
  const test::PaceProbe wedged;
  ASSERT_TRUE(eventually([&] { return b.is_leader().status == Leadership::Status::leader; }, 5s));
  EXPECT_TRUE(wedged.within(2500ms)) << wedged.describe(2500ms);  // within the TTL (+ a follower poll)
  EXPECT_NE(a.is_leader().status, Leadership::Status::leader);
  EXPECT_EQ(a.is_leader().status, Leadership::Status::follower);  // not an election error: its store is fine
  // A wedged follower does not campaign either.
  b_stalled = true;
  alive = true;
  ASSERT_TRUE(eventually([&] { return a.is_leader().status == Leadership::Status::leader; }, 5s));
}

}  // namespace
}  // namespace fleetcron::redis
