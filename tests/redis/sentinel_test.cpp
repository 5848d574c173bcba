// Redis behind Sentinel against real processes: a primary, a replica and
// three sentinels (redis-server --sentinel) on loopback. The client asks
// the sentinels for the primary, checks ROLE, follows a failover (the
// primary killed; a manual SENTINEL FAILOVER that leaves the old primary
// up, answering READONLY) and names every sentinel when none can answer.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "fleetcron/coordination.h"
#include "fleetcron/redis/claimer.h"
#include "redis/commands.h"
#include "redis_server.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

/// Polls `condition` every 50 ms for up to `limit` (waiting for real
/// processes — sentinels, a failover — not for time to pass).
bool eventually(const std::function<bool()>& condition, std::chrono::seconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

class SentinelFleet {
 public:
  SentinelFleet()
      : primary_(),
        replica_(test::RedisServer::Options{.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary_.port())}}) {
    for (int i = 0; i < 3; ++i) {
      sentinels_.push_back(std::make_unique<test::RedisServer>(test::RedisServer::Options{.sentinel_of = primary_.port()}));
    }
    // Each sentinel knows the replica (from the primary's INFO) and its two peers (by hello messages).
    for (const auto& sentinel : sentinels_) {
      Client client(direct(sentinel->port()));
      const bool ready = eventually([&] {
        const Reply replicas = client.impl().command({"SENTINEL", "REPLICAS", "fleet"});
        const Reply peers = client.impl().command({"SENTINEL", "SENTINELS", "fleet"});
        return replicas.elements.size() == 1 && peers.elements.size() == 2;
      });
      if (!ready) throw std::runtime_error("the sentinels did not find the replica and each other");
    }
  }

  static ClientOptions direct(std::uint16_t port) {
    ClientOptions options;
    options.port = port;
    options.request_timeout = 5s;  // WAIT below waits up to 2 s
    return options;
  }

  [[nodiscard]] std::string uri(const std::string& master = "fleet") const {
    std::string hosts;
    for (const auto& sentinel : sentinels_) hosts += (hosts.empty() ? "" : ",") + ("127.0.0.1:" + std::to_string(sentinel->port()));
    return "redis-sentinel://" + hosts + "/" + master + "?connect_timeout=500ms&request_timeout=500ms";
  }

  /// The primary's port as the first sentinel names it.
  std::uint16_t named_primary() {
    Client client(direct(sentinels_[0]->port()));
    const Reply reply = client.impl().command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fleet"});
    return reply.elements.size() == 2 ? static_cast<std::uint16_t>(std::stoi(reply.elements[1].text)) : 0;
  }

  static std::string role(std::uint16_t port) {
    Client client(direct(port));
    return client.impl().command({"ROLE"}).elements.at(0).text;
  }

  test::RedisServer& primary() noexcept { return primary_; }
  test::RedisServer& replica() noexcept { return replica_; }
  std::vector<std::unique_ptr<test::RedisServer>>& sentinels() noexcept { return sentinels_; }

 private:
  test::RedisServer primary_;
  test::RedisServer replica_;
  std::vector<std::unique_ptr<test::RedisServer>> sentinels_;
};

TEST(RedisSentinel, TheSentinelsNameThePrimaryAndWritesReachIt) {
  SentinelFleet fleet;
  Client client(parse_uri(fleet.uri()).connection);
  client.impl().command({"SET", "where", "primary"});
  Client primary(SentinelFleet::direct(fleet.primary().port()));
  EXPECT_EQ(primary.impl().command({"GET", "where"}).text, "primary");
  EXPECT_TRUE(client.describe().starts_with("redis-sentinel://127.0.0.1:")) << client.describe();
  EXPECT_TRUE(client.describe().ends_with("/fleet/0")) << client.describe();
}

TEST(RedisSentinel, WithoutAnAnswerEverySentinelIsNamed) {
  SentinelFleet fleet;
  {
    Client client(parse_uri(fleet.uri("nosuch")).connection);
    try {
      client.ping();
      FAIL() << "connected";
    } catch (const ConnectError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("no sentinel names a primary of nosuch that answers as one"), std::string::npos) << message;
      for (const auto& sentinel : fleet.sentinels()) {
        EXPECT_NE(message.find("sentinel 127.0.0.1:" + std::to_string(sentinel->port()) + ": does not know this master"),
                  std::string::npos)
            << message;
      }
    }
  }
  for (const auto& sentinel : fleet.sentinels()) sentinel->stop();
  Client client(parse_uri(fleet.uri()).connection);
  try {
    client.ping();
    FAIL() << "connected";
  } catch (const ConnectError& e) {
    EXPECT_NE(std::string(e.what()).find("connect failed"), std::string::npos) << e.what();
  }
}

TEST(RedisSentinel, AKilledPrimaryIsFollowedToThePromotedReplica) {
  SentinelFleet fleet;
  auto options = parse_uri(fleet.uri()).connection;
  options.reconnect_backoff_max = 200ms;
  auto client = std::make_shared<Client>(options);
  const std::string prefix = test::unique_prefix();
  test::seed_store_epoch(fleet.primary().uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix});
  const auto before = fire_key("report", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  ASSERT_EQ(claimer.claim(before).status, ClaimResult::Status::claimed);
  Client primary(SentinelFleet::direct(fleet.primary().port()));
  primary.impl().command({"WAIT", "1", "2000"});  // the replica has the claim: this test is not about lag

  fleet.primary().stop();  // SIGTERM, then SIGKILL
  ASSERT_TRUE(eventually([&] { return fleet.named_primary() == fleet.replica().port(); }))
      << "the sentinels did not fail over";
  ASSERT_TRUE(eventually([&] {
    try {
      client->ping();
      return true;
    } catch (const BackendError&) {
      return false;
    }
  }));
  EXPECT_EQ(SentinelFleet::role(fleet.replica().port()), "master");
  // The claim made before the failover holds: the promoted replica has it
  // and its new replication ID marks a store reset (docs/reliability.md).
  EXPECT_EQ(claimer.claim(before).status, ClaimResult::Status::store_reset);
  // Fires from the new epoch + max_clock_skew (2m30s here) on are claimed.
  const auto after = fire_key("report", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) + 5min);
  EXPECT_EQ(claimer.claim(after).status, ClaimResult::Status::claimed);
  EXPECT_EQ(client->impl().command({"ROLE"}).elements.at(0).text, "master");
}

/// True once `call` returns without a BackendError.
bool succeeds(const std::function<void()>& call) {
  return eventually([&] {
    try {
      call();
      return true;
    } catch (const BackendError&) {
      return false;
    }
  });
}

TEST(RedisSentinel, AManualFailoverIsFollowed) {
  SentinelFleet fleet;
  auto options = parse_uri(fleet.uri()).connection;
  options.pool_size = 1;
  options.reconnect_backoff_max = 200ms;
  Client client(options);
  client.impl().command({"SET", "k", "1"});
  Client sentinel(SentinelFleet::direct(fleet.sentinels()[0]->port()));
  ASSERT_EQ(sentinel.impl().command({"SENTINEL", "FAILOVER", "fleet"}).text, "OK");
  ASSERT_TRUE(eventually([&] { return SentinelFleet::role(fleet.primary().port()) == "slave"; }))
      << "the old primary was not demoted";
  // The sentinels close the demoted primary's client connections: the
  // pooled one breaks, and the sentinels are asked again.
  ASSERT_TRUE(succeeds([&] {
    if (client.impl().command({"SET", "k", "2"}).type != Reply::Type::status) throw IoError("not yet");
  }));
  Client promoted(SentinelFleet::direct(fleet.replica().port()));
  EXPECT_EQ(promoted.impl().command({"GET", "k"}).text, "2");
  EXPECT_GE(client.stats().connects, 2u);
}

TEST(RedisSentinel, APrimaryThatBecameAReplicaAnswersReadonlyAndLeavesThePool) {
  SentinelFleet fleet;
  auto options = parse_uri(fleet.uri()).connection;
  options.pool_size = 1;
  options.reconnect_backoff_initial = 1ms;
  options.reconnect_backoff_max = 1ms;
  Client client(options);
  client.impl().command({"SET", "k", "1"});
  // Roles swapped behind the sentinels' back, no connection closed: the
  // pooled connection now reaches a replica.
  Client old_primary(SentinelFleet::direct(fleet.primary().port()));
  Client old_replica(SentinelFleet::direct(fleet.replica().port()));
  old_replica.impl().command({"REPLICAOF", "NO", "ONE"});
  old_primary.impl().command({"REPLICAOF", "127.0.0.1", std::to_string(fleet.replica().port())});
  const Reply refused = client.impl().command({"SET", "k", "2"});
  EXPECT_TRUE(refused.is_error("READONLY")) << refused.text;
  // Dropped: the next call asks the sentinels, which still name the old
  // primary, whose ROLE gives it away: no write reaches a replica.
  try {
    client.ping();
    ADD_FAILURE() << "connected to a replica";
  } catch (const ConnectError& e) {
    EXPECT_NE(std::string(e.what()).find(", named primary of fleet by the sentinels, says ROLE slave"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(client.stats().connects, 1u);
  EXPECT_GE(client.stats().connect_failures, 1u);
}

}  // namespace
}  // namespace fleetcron::redis
