// Schedulers coordinated through a real nats-server: exactly-once across
// replicas with the KV claimer, and leadership from the NATS elector.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "fleetcron/fleetcron.h"
#include "fleetcron/nats/coordination.h"
#include "nats_server.h"
#include "support/replica_fleet.h"
#include "support/tally.h"
#include "support/pace_probe.h"

namespace fleetcron::nats {
namespace {

using namespace std::chrono_literals;
using test::Tally;


std::shared_ptr<Connection> connect() {
  ConnectionOptions options;
  options.servers = {test::shared_nats_url()};
  return Connection::connect(options);
}

TEST(NatsScheduler, ThreeReplicasRunEachOfThousandsOfFiresExactlyOnceWithIncreasingFences) {
  const std::string bucket_name = test::unique_bucket();
  // After the bucket's creation + the skew guard: earlier fires would be
  // refused as store-reset. (The claimers keep the real clock.)
  auto clock = std::make_shared<VirtualClock>(std::chrono::time_point_cast<std::chrono::seconds>(
                                                  std::chrono::system_clock::now()) + 1h);
  // 100 jobs x 10 instants = 1,000 fires per replica; one connection per
  // replica, as separate processes would have.
  test::ReplicaFleet fleet(3, 100, clock, [&](std::size_t) {
    return std::make_shared<Claimer>(connect()->bucket(BucketConfig{.name = bucket_name, .ttl = 10min}));
  });
  ASSERT_TRUE(fleet.advance(10));
  EXPECT_TRUE(fleet.stop());
  EXPECT_TRUE(fleet.ran_each_fire_once_with_increasing_fences());
  EXPECT_EQ(fleet.runs(), 1000u);
}

TEST(NatsScheduler, ElectorGatesFiresFencesWithTheWonRevisionAndHandsOverOnStop) {
  auto connection = connect();
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 750ms});
  ElectorOptions elector_options;
  elector_options.election.startup_splay = 0ms;
  elector_options.election.validate_ttl = false;
  elector_options.name = "replica-a";
  auto a = std::make_shared<Elector>(bucket, elector_options);
  ASSERT_TRUE([&] {
    for (int i = 0; i < 600 && a->is_leader().status != Leadership::Status::leader; ++i) std::this_thread::sleep_for(5ms);
    return a->is_leader().status == Leadership::Status::leader;
  }());
  const auto term = a->is_leader().term;
  EXPECT_GT(term, 0u);
  elector_options.name = "replica-b";
  auto b = std::make_shared<Elector>(bucket, elector_options);
  EXPECT_EQ(b->is_leader().status, Leadership::Status::follower);

  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-06-01T00:00:00Z"));
  auto tally = std::make_shared<Tally>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = tally;
  options.elector = a;
  std::atomic<std::uint64_t> fence{0};
  std::vector<std::uint64_t> lost;
  {
    Scheduler scheduler(options);
    scheduler.add("* * * * *", [&](const FireContext& fire, std::stop_token) { fence = fire.fence; });
    scheduler.start();
    clock->advance(1min);
    ASSERT_TRUE(tally->wait([&] { return tally->completed == 1; }));
    EXPECT_EQ(fence.load(), term);
    EXPECT_TRUE(scheduler.stop(clock->steady_now() + 30s));  // resigns a
  }
  const test::PaceProbe stopped;
  bool b_leads = false;
  for (int i = 0; i < 400 && !b_leads; ++i) {
    b_leads = b->is_leader().status == Leadership::Status::leader;
    if (!b_leads) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(b_leads);
  EXPECT_TRUE(stopped.within(1s)) << stopped.describe(1s);  // resignation + watch: no TTL wait
  EXPECT_GT(b->is_leader().term, term);
}

}  // namespace
}  // namespace fleetcron::nats
