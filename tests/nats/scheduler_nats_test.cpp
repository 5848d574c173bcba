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
  constexpr int entries = 100, steps = 10;  // 1,000 fires per replica
  std::mutex mutex;
  std::map<std::string, std::vector<std::uint64_t>> fences;
  std::vector<std::pair<Instant, std::uint64_t>> by_instant;
  struct Replica {
    std::shared_ptr<Tally> tally = std::make_shared<Tally>();
    std::unique_ptr<Scheduler> scheduler;
  };
  std::vector<Replica> replicas(3);
  for (auto& replica : replicas) {
    auto connection = connect();  // one connection per replica, as separate processes would have
    SchedulerOptions options;
    options.clock = clock;
    options.recorder = replica.tally;
    options.claimer = std::make_shared<Claimer>(connection->bucket(BucketConfig{.name = bucket_name, .ttl = 10min}));
    replica.scheduler = std::make_unique<Scheduler>(options);
    for (int i = 0; i < entries; ++i) {
      replica.scheduler->add(aligned_every(1s), [&](const FireContext& fire, std::stop_token) {
        std::lock_guard guard(mutex);
        fences[fire.fire_key].push_back(fire.fence);
        by_instant.emplace_back(fire.scheduled_at, fire.fence);
      }, EntryOptions{.key = "job" + std::to_string(i)});
    }
    replica.scheduler->start();
  }
  for (int step = 1; step <= steps; ++step) {
    clock->advance(1s);
    for (auto& replica : replicas) {
      ASSERT_TRUE(replica.tally->wait([&] {
        return replica.tally->completed + replica.tally->total_skips() == static_cast<std::size_t>(entries * step);
      })) << "step " << step;
    }
  }
  for (auto& replica : replicas) EXPECT_TRUE(replica.scheduler->stop(clock->steady_now() + 30s));
  ASSERT_EQ(fences.size(), static_cast<std::size_t>(entries * steps));
  for (const auto& [key, runs] : fences) EXPECT_EQ(runs.size(), 1u) << key;
  for (auto& replica : replicas) EXPECT_EQ(replica.tally->total_skips(), replica.tally->skips[SkipReason::already_claimed]);
  std::sort(by_instant.begin(), by_instant.end());
  std::set<std::uint64_t> distinct;
  std::uint64_t max_before = 0, max_current = 0;
  Instant current{};
  for (const auto& [instant, fence] : by_instant) {
    if (instant != current) {
      max_before = std::max(max_before, max_current);
      current = instant;
    }
    EXPECT_GT(fence, max_before);  // a later instant's fires have larger fences
    max_current = std::max(max_current, fence);
    distinct.insert(fence);
  }
  EXPECT_EQ(distinct.size(), by_instant.size());
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
