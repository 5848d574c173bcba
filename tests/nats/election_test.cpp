// nats::Election against a real nats-server: the reference's scenarios
// (asyncjobs/election tests), TTL validation, resignation, restarts.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "fleetcron/nats/coordination.h"
#include "nats_server.h"
#include "support/eventually.h"

namespace fleetcron::nats {
namespace {

using namespace std::chrono_literals;
using test::eventually;

std::shared_ptr<Connection> connect(const std::string& url) {
  ConnectionOptions options;
  options.servers = {url};
  options.request_timeout = 500ms;
  return Connection::connect(options);
}

// Short TTLs as in the reference tests (750 ms: interval 562.5 ms), so the
// reference's TTL rule is off and there is no splay: explicit options.
ElectionOptions fast() {
  ElectionOptions options;
  options.startup_splay = 0ms;
  options.validate_ttl = false;
  return options;
}

TEST(NatsElection, StateNamesAndTtlValidation) {
  EXPECT_EQ(to_string(State::unknown), "unknown");
  EXPECT_EQ(to_string(State::candidate), "candidate");
  EXPECT_EQ(to_string(State::leader), "leader");
  auto connection = connect(test::shared_nats_url());
  auto long_ttl = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 24h});
  auto short_ttl = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 5s});
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
  EXPECT_EQ(message([&] { Election e("n", "election", long_ttl); }), "bucket TTL should be less than or equal to 1 hour");
  EXPECT_EQ(message([&] { Election e("n", "election", short_ttl); }), "bucket TTL should be 10 seconds or more");
  EXPECT_EQ(message([&] { Election e("n", "bad key", short_ttl, fast()); }).find("key \"bad key\" is not a valid NATS key"),
            16u);
  auto ten = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 10s});
  auto hour = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1h});
  Election at_ten("n", "election", ten);  // bounds are inclusive
  Election at_hour("n", "election", hour);
  EXPECT_EQ(at_ten.campaign_interval(), 7500ms);
}

TEST(NatsElection, StopUnblocksStartAndAStoppedElectionRestarts) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  Election election("solo", "election", bucket, fast());
  EXPECT_FALSE(election.is_leader());
  EXPECT_EQ(election.state(), State::unknown);
  for (int round = 0; round < 2; ++round) {
    std::atomic<bool> returned{false};
    std::thread runner([&] {
      election.start();
      returned = true;
    });
    ASSERT_TRUE(eventually([&] { return election.is_leader(); }, 3000ms)) << "round " << round;
    EXPECT_EQ(election.state(), State::leader);
    EXPECT_THROW(election.start(), std::logic_error);  // already running
    election.stop();
    EXPECT_TRUE(eventually([&] { return returned.load(); }, 3000ms));
    runner.join();
    EXPECT_FALSE(election.is_leader());
    EXPECT_EQ(election.state(), State::candidate);
  }
}

TEST(NatsElection, OnLostFiresAtShutdownAfterOnWonAndTheKeyIsResigned) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  std::atomic<int> wins{0}, losses{0};
  auto options = fast();
  options.on_won = [&] { ++wins; };
  options.on_lost = [&] { ++losses; };
  Election election("leader-1", "election", bucket, options);
  std::stop_source stop;
  std::thread runner([&] { election.start(stop.get_token()); });
  ASSERT_TRUE(eventually([&] { return wins.load() == 1; }, 3000ms));
  const auto token = election.fencing_token();
  EXPECT_GT(token, 0u);
  stop.request_stop();  // the stop token, like the reference's ctx
  runner.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(losses.load(), 1);
  // Resigned with a revision-guarded delete: the key holds a delete marker,
  // over which a plain create (choria's Go Create) succeeds at once.
  EXPECT_FALSE(bucket->get("election"));
  EXPECT_TRUE(bucket->create("election", "a-go-candidate"));
  // The term is the winning write's server time in µs.
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LT(std::llabs(static_cast<long long>(token) - now_us), 60'000'000LL) << token;
}

TEST(NatsElection, NoOnLostWhenLeadershipIsLostBeforeItWasAnnounced) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  std::atomic<int> losses{0};
  std::atomic<bool> deleted{false};
  auto options = fast();
  options.on_lost = [&] { ++losses; };
  options.on_campaign = [&](State state) {
    // The tick between the winning create and the first renewal: delete.
    if (state == State::leader && !deleted.exchange(true)) bucket->remove("election");
  };
  Election election("e", "election", bucket, options);
  std::thread runner([&] { election.start(); });
  ASSERT_TRUE(eventually([&] { return deleted.load(); }, 3000ms));
  std::this_thread::sleep_for(1500ms);  // a window in which an OnLost would show (the reference waits 1.5 s)
  EXPECT_EQ(losses.load(), 0);          // (it wins again meanwhile; stopping then would announce a loss)
  election.stop();
  runner.join();
}

TEST(NatsElection, TenCandidatesUnderKeyKillsNeverHaveTwoAnnouncedLeaders) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  std::mutex mutex;
  int active = 0, max_active = 0, wins = 0, losses = 0, other_losses = 0;
  std::atomic<bool> running{true};
  std::vector<std::unique_ptr<Election>> elections;
  for (int i = 0; i < 10; ++i) {
    auto options = fast();
    options.startup_splay = 500ms;
    options.on_won = [&] {
      std::lock_guard guard(mutex);
      ++wins;
      max_active = std::max(max_active, ++active);
    };
    options.on_lost = [&] {
      std::lock_guard guard(mutex);
      ++losses;
      --active;
    };
    elections.push_back(std::make_unique<Election>("member " + std::to_string(i), "election", bucket, options));
  }
  // A second key in the same bucket must be unaffected by the kills: each
  // loss of its leader must be one the host's pace explains, a renewal
  // that did not come back within the lease (750 ms here, easily missed
  // beside busy loops), which the election logs as a demotion. Counted
  // after every thread ended, so the order of the log line and the
  // callback does not matter.
  int other_late_demotions = 0;
  for (int i = 0; i < 2; ++i) {
    auto options = fast();
    options.on_lost = [&] {
      std::lock_guard guard(mutex);
      if (running) ++other_losses;
    };
    options.debug = [&](std::string_view message) {
      if (message.find("not renewed within") == std::string_view::npos) return;
      std::lock_guard guard(mutex);
      ++other_late_demotions;
    };
    elections.push_back(std::make_unique<Election>("other " + std::to_string(i), "other", bucket, options));
  }
  std::vector<std::thread> threads;
  for (auto& election : elections) threads.emplace_back([&election] { election->start(); });
  int kills = 0;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(100ms);  // the reference's pace
    bool someone_leads = false;
    {
      std::lock_guard guard(mutex);
      someone_leads = active > 0;
    }
    if (!someone_leads) continue;
    ++kills;
    if (kills % 3 == 0) {
      bucket->remove("election");
    } else {
      (void)bucket->put("election", "");  // corrupt it
    }
  }
  running = false;
  for (auto& election : elections) election->stop();
  for (auto& thread : threads) thread.join();
  std::lock_guard guard(mutex);
  EXPECT_GE(kills, 4);
  EXPECT_GE(wins, 4);
  EXPECT_GE(losses, 4);
  EXPECT_LE(max_active, 1);
  EXPECT_LE(other_losses, other_late_demotions) << "the other key lost a leader that renewed in time";
}

// Two candidates on a bucket with the reference's smallest TTL (10 s):
// "a" leads and has announced it (one campaign interval, 7.5 s), "b" is a
// candidate. Their threads are jthreads: destroyed first, they stop the
// elections through the stop token (which, unlike stop(), also ends a
// start() that had not begun yet) and join.
class LeaderAndCandidate {
 public:
  explicit LeaderAndCandidate(const std::shared_ptr<Connection>& connection)
      : bucket(connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 10s})) {}

  /// Check with ASSERT_NO_FATAL_FAILURE.
  void start() {
    auto options = fast();
    options.validate_ttl = true;
    options.on_won = [this] { ++a_wins; };
    a = std::make_unique<Election>("a", "election", bucket, options);
    a_thread = std::jthread([this](std::stop_token stop) { a->start(stop); });
    ASSERT_TRUE(eventually([&] { return a->state() == State::leader; }, 3000ms));
    options.on_won = [this] { ++b_wins; };
    b = std::make_unique<Election>("b", "election", bucket, options);
    b_thread = std::jthread([this](std::stop_token stop) { b->start(stop); });
    ASSERT_TRUE(eventually([&] { return b->state() == State::candidate; }, 3000ms));
    ASSERT_TRUE(eventually([&] { return a_wins.load() == 1; }, 10000ms));  // one interval (7.5 s)
  }

  std::shared_ptr<Bucket> bucket;
  std::atomic<int> a_wins{0}, b_wins{0};
  std::unique_ptr<Election> a, b;

 private:
  std::jthread a_thread, b_thread;  // last: stopped and joined before the elections go
};

TEST(NatsElection, GracefulHandoverAnnouncesTheNextLeaderWellUnderASecond) {
  // Without resignation and the watch, a handover would take up to the
  // 10 s TTL plus a campaign interval.
  LeaderAndCandidate fleet(connect(test::shared_nats_url()));
  ASSERT_NO_FATAL_FAILURE(fleet.start());
  const auto stopped = std::chrono::steady_clock::now();
  fleet.a->stop();
  ASSERT_TRUE(eventually([&] { return fleet.b_wins.load() == 1; }, 5000ms));
  const auto handover = std::chrono::steady_clock::now() - stopped;
  EXPECT_LT(handover, 1s) << std::chrono::duration_cast<std::chrono::milliseconds>(handover).count() << " ms";
  EXPECT_TRUE(fleet.b->is_leader());
  EXPECT_GT(fleet.b->fencing_token(), 0u);
}

// Only a resignation (its delete marker carries Fleetcron-Resigned) lets
// the winner announce at once; after anyone else's delete (an operator's
// `nats kv del`) the old leader may not have announced its loss yet, so
// the winner announces after its next renewal, as after any win.
TEST(NatsElection, AnOperatorsDeleteIsNotTakenForAResignation) {
  LeaderAndCandidate fleet(connect(test::shared_nats_url()));
  ASSERT_NO_FATAL_FAILURE(fleet.start());
  fleet.bucket->remove("election");  // not a resignation
  ASSERT_TRUE(eventually([&] { return fleet.b->state() == State::leader; }, 3000ms));  // b took the key...
  EXPECT_FALSE(fleet.b->is_leader());                                                 // ...but does not announce yet
  EXPECT_EQ(fleet.b_wins.load(), 0);
  EXPECT_TRUE(eventually([&] { return !fleet.a->is_leader(); }, 1000ms));  // a saw the delete and lost at once
}

TEST(NatsElection, AnElectorResignedBeforeItsThreadStartedDoesNotHang) {
  // Review finding: start() cleared a stop that came before it ran, so an
  // Elector destroyed at once campaigned forever and its join never returned.
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  ElectorOptions options;
  options.election = fast();
  // Bounded: twenty electors made and destroyed at once (resign() + join)
  // must all return within 10 s; a hang fails here instead of timing out.
  auto done = std::make_shared<std::atomic<int>>(0);
  std::thread churn([bucket, options, done] {
    for (int i = 0; i < 20; ++i) {
      { Elector elector(bucket, options); }
      done->fetch_add(1);
    }
  });
  const bool returned = eventually([&] { return done->load() == 20; }, 10'000ms);
  if (!returned) churn.detach();  // hung: leave it, the assertion fails
  ASSERT_TRUE(returned) << done->load() << " of 20 electors were destroyed within 10 s";
  churn.join();
}

TEST(NatsElection, ABackoffOfZeroDoesNotSpin) {
  struct Zero final : Backoff {
    std::chrono::nanoseconds duration(int) const override { return std::chrono::nanoseconds::zero(); }
  };
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  std::atomic<int> campaigns{0};
  auto options = fast();
  options.backoff = std::make_shared<Zero>();
  options.on_campaign = [&](State) { ++campaigns; };
  Election election("z", "election", bucket, options);
  std::thread runner([&] { election.start(); });
  std::this_thread::sleep_for(300ms);  // an observation window, not a synchronisation
  election.stop();
  runner.join();
  EXPECT_LE(campaigns.load(), 80);  // at least 1% of the 562 ms interval between campaigns: about 53
  EXPECT_GE(campaigns.load(), 2);
}

TEST(NatsElection, ServerRestartMidCampaignNeverGivesTwoLeadersAndLeadershipRecovers) {
  test::NatsServer server;
  ConnectionOptions connection_options;
  connection_options.servers = {server.url()};
  connection_options.request_timeout = 300ms;
  connection_options.reconnect_wait = 50ms;
  auto connection = Connection::connect(connection_options);
  auto bucket = connection->bucket(BucketConfig{.name = "RESTART", .ttl = 750ms});
  std::mutex mutex;
  int active = 0, max_active = 0, wins = 0;
  std::vector<std::unique_ptr<Election>> elections;
  for (int i = 0; i < 3; ++i) {
    auto options = fast();
    options.on_won = [&] {
      std::lock_guard guard(mutex);
      ++wins;
      max_active = std::max(max_active, ++active);
    };
    options.on_lost = [&] {
      std::lock_guard guard(mutex);
      --active;
    };
    elections.push_back(std::make_unique<Election>("r" + std::to_string(i), "election", bucket, options));
  }
  std::vector<std::thread> threads;
  for (auto& election : elections) threads.emplace_back([&election] { election->start(); });
  auto leaders = [&] {
    int n = 0;
    for (auto& election : elections) n += election->is_leader() ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return leaders() == 1; }, 5000ms));
  server.stop();
  ASSERT_TRUE(eventually([&] { return leaders() == 0; }, 3000ms));  // nobody leads without the store
  server.start();  // same port, same store
  ASSERT_TRUE(eventually([&] { return leaders() == 1; }, 15000ms));
  for (auto& election : elections) election->stop();
  for (auto& thread : threads) thread.join();
  std::lock_guard guard(mutex);
  EXPECT_LE(max_active, 1);
  EXPECT_GE(wins, 2);
}

}  // namespace
}  // namespace fleetcron::nats
