// Schedulers coordinated through a real redis-server: exactly-once across
// replicas, fencing, libtnb/cron interoperation, outages and clock skew.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "fleetcron/fleetcron.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/elector.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/replica_fleet.h"
#include "support/tally.h"
#include "support/time.h"
#include "support/pace_probe.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;
using test::real_now;
using test::Tally;


/// Polls (real time) until the elector leads.
bool eventually_leader(Elector& elector, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (elector.is_leader().status != Leadership::Status::leader) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}


TEST(RedisScheduler, ThreeReplicasRunEachOfThousandsOfFiresExactlyOnceWithIncreasingFences) {
  const std::string prefix = test::unique_prefix();
  auto clock = std::make_shared<VirtualClock>(real_now());
  test::seed_store_epoch(test::shared_redis_uri(), prefix);  // not about resets
  // 100 jobs x 10 instants = 1,000 fires per replica.
  test::ReplicaFleet fleet(3, 100, clock, [&](std::size_t) {
    return std::make_shared<Claimer>(std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection),
                                     ClaimerOptions{.claim_prefix = prefix, .clock = clock});
  });
  ASSERT_TRUE(fleet.advance(10));
  EXPECT_TRUE(fleet.stop());
  EXPECT_TRUE(fleet.ran_each_fire_once_with_increasing_fences());
  EXPECT_EQ(fleet.runs(), 1000u);
  EXPECT_EQ(fleet.skips(SkipReason::already_claimed), 2000u);
}

TEST(RedisScheduler, AClaimWrittenByLibtnbCronMakesTheSchedulerSkipThatFire) {
  const std::string prefix = test::unique_prefix();
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-01-02T15:04:00Z"));
  // Wall time far from the server's: the skew guard is opened wide for this
  // test, and the claim TTL with it (the guard must stay below TTL/2).
  SchedulerOptions options;
  options.clock = clock;
  auto tally = std::make_shared<Tally>();
  options.recorder = tally;
  options.claimer = std::make_shared<Claimer>(
      client, ClaimerOptions{.claim_prefix = prefix, .claim_ttl = std::chrono::hours{24 * 365 * 3},
                             .max_clock_skew = std::chrono::hours{24 * 365}});
  ASSERT_EQ(client->impl().command({"SET", prefix + "report@2026-01-02T15:05:00Z", "1", "NX", "PX", "600000"}).text, "OK");
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Scheduler scheduler(options);
  scheduler.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "report"});
  scheduler.start();
  clock->advance(1min);
  ASSERT_TRUE(tally->wait([&] { return tally->total_skips() == 1; }));
  EXPECT_EQ(tally->skips[SkipReason::already_claimed], 1u);
  clock->advance(1min);  // the next minute is not claimed by anyone: it runs
  ASSERT_TRUE(tally->wait([&] { return tally->completed == 1; }));
  EXPECT_TRUE(scheduler.stop(clock->steady_now() + 30s));
}

TEST(RedisScheduler, RedisStoppedMidRunSkipsEveryFireWithClaimErrorThenRecovers) {
  test::RedisServer server;
  ClientOptions client_options = parse_uri(server.uri()).connection;
  client_options.request_timeout = 500ms;
  client_options.connect_timeout = 500ms;
  client_options.reconnect_backoff_initial = 1ms;
  client_options.reconnect_backoff_max = 1ms;
  auto client = std::make_shared<Client>(client_options);
  auto clock = std::make_shared<VirtualClock>(real_now());
  auto tally = std::make_shared<Tally>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = tally;
  // The claimer keeps the real clock: the virtual one runs ahead of the
  // server's with every advance, which the skew guard would refuse. Every
  // restart of Redis is a store reset: fires before its epoch + 2 s are
  // refused (store-reset); the virtual instants are ahead of that by then.
  options.claimer = std::make_shared<Claimer>(client, ClaimerOptions{.claim_ttl = 10s, .max_clock_skew = 2s});
  test::seed_store_epoch(server.uri(), "cron:claim:");
  Scheduler scheduler(options);
  for (int i = 0; i < 5; ++i) {
    scheduler.add(aligned_every(1s), [](const FireContext&, std::stop_token) {},
                  EntryOptions{.key = "j" + std::to_string(i)});
  }
  scheduler.start();
  clock->advance(1s);
  ASSERT_TRUE(tally->wait([&] { return tally->completed == 5; }));
  server.stop();
  for (int step = 1; step <= 3; ++step) {
    clock->advance(1s);
    ASSERT_TRUE(tally->wait([&] { return tally->skips[SkipReason::claim_error] == static_cast<std::size_t>(5 * step); }))
        << "step " << step;
  }
  EXPECT_EQ(tally->completed, 5u);  // nothing ran while Redis was down
  EXPECT_NE(tally->last_skip_error.find(server.uri().substr(0, 20)), std::string::npos) << tally->last_skip_error;
  server.start();
  // The first fires after the restart may meet a dead pooled connection
  // (skipped, connection dropped); within a few seconds every fire runs.
  std::size_t completed_before = 0;
  bool recovered = false;
  for (int step = 0; step < 20 && !recovered; ++step) {
    {
      std::lock_guard guard(tally->mutex);
      completed_before = tally->completed;
    }
    clock->advance(1s);
    // Fires so far: 5 per advance, and this is advance 5 + step.
    ASSERT_TRUE(tally->wait(
        [&] { return tally->completed + tally->total_skips() == static_cast<std::size_t>(5 * (5 + step)); }));
    std::lock_guard guard(tally->mutex);
    recovered = tally->completed == completed_before + 5;
  }
  EXPECT_TRUE(recovered);
  EXPECT_TRUE(scheduler.stop(clock->steady_now() + 30s));
}

TEST(RedisScheduler, ClockSkewSkipsWithItsOwnReason) {
  const std::string prefix = test::unique_prefix();
  auto clock = std::make_shared<VirtualClock>(real_now() - 20min);  // 20 minutes behind the server
  auto tally = std::make_shared<Tally>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = tally;
  options.claimer = std::make_shared<Claimer>(std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection),
                                              ClaimerOptions{.claim_prefix = prefix, .clock = clock});
  Scheduler scheduler(options);
  scheduler.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "k"});
  scheduler.start();
  clock->advance(1min);
  ASSERT_TRUE(tally->wait([&] { return tally->total_skips() == 1; }));
  EXPECT_EQ(tally->skips[SkipReason::clock_skew], 1u);
  EXPECT_NE(tally->last_skip_error.find("behind the Redis server's"), std::string::npos) << tally->last_skip_error;
  EXPECT_EQ(tally->completed, 0u);
  EXPECT_TRUE(scheduler.stop(clock->steady_now() + 30s));
}

TEST(RedisScheduler, LeaderGatedRunsAreFencedByTheTermAndStopResigns) {
  const std::string key = test::unique_prefix() + "leader";
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  auto clock = std::make_shared<VirtualClock>(real_now());
  auto elector = std::make_shared<Elector>(client, ElectorOptions{.leader_key = key});
  auto tally = std::make_shared<Tally>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = tally;
  options.elector = elector;
  std::atomic<std::uint64_t> fence{0};
  Scheduler scheduler(options);
  scheduler.add("* * * * *", [&](const FireContext& fire, std::stop_token) { fence = fire.fence; });
  scheduler.start();
  clock->advance(1min);
  ASSERT_TRUE(tally->wait([&] { return tally->completed == 1; }));
  EXPECT_EQ(fence.load(), elector->state().term);
  EXPECT_EQ(client->impl().command({"GET", key}).text, elector->identity());
  EXPECT_TRUE(scheduler.stop(clock->steady_now() + 30s));
  EXPECT_TRUE(client->impl().command({"GET", key}).is_nil());  // resigned on stop: hand-over at once
}

// Review: after resign() a draining scheduler asked is_leader() for a fire
// queued behind a busy worker; the elector campaigned, took the lease back
// with no keep-alive left, and the fleet had no leader for a whole TTL.
TEST(RedisScheduler, ADrainingLeaderStaysResignedAndAnotherLeadsWithinASecond) {
  const std::string key = test::unique_prefix() + "leader";
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  auto clock = std::make_shared<VirtualClock>(real_now());
  auto elector = std::make_shared<Elector>(client, ElectorOptions{.leader_key = key, .lease = {.keep_alive = true}});
  ASSERT_TRUE(eventually_leader(*elector));
  Elector other(client, ElectorOptions{.leader_key = key, .lease = {.keep_alive = true}});  // follower, polls every 500 ms
  auto tally = std::make_shared<Tally>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = tally;
  options.elector = elector;
  options.limits.max_concurrent = 1;  // the second fire waits in the queue behind the first
  std::mutex mutex;
  std::condition_variable cv;
  bool busy = false, release = false;
  Scheduler scheduler(options);
  scheduler.add("* * * * *", [&](const FireContext&, std::stop_token) {
    std::unique_lock lock(mutex);
    busy = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  scheduler.add("* * * * *", [](const FireContext&, std::stop_token) {});
  scheduler.start();
  clock->advance(1min);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return busy; }));
  }
  std::thread draining([&] { scheduler.drain(clock->steady_now() + 30s); });
  // Resigned: the key no longer names the draining leader (gone, or the
  // follower's already: on a busy host a poll may miss the gap between).
  const auto resigned = [&] { return client->impl().command({"GET", key}).text != elector->identity(); };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!resigned() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  const bool resigned_in_time = resigned();
  {
    std::lock_guard guard(mutex);
    release = true;
  }
  cv.notify_all();
  draining.join();  // before any assertion returns: a joinable thread's destructor aborts
  ASSERT_TRUE(resigned_in_time) << "drain did not resign";
  const test::PaceProbe drained;
  EXPECT_EQ(tally->skips[SkipReason::not_leader], 1u);  // the queued fire: resigned, so not ours
  EXPECT_EQ(elector->is_leader().status, Leadership::Status::follower);
  const std::string holder = client->impl().command({"GET", key}).text;
  EXPECT_NE(holder, elector->identity());
  // Waited for generously; the bound is judged by the host's measured pace.
  ASSERT_TRUE(eventually_leader(other, 20s));
  EXPECT_TRUE(drained.within(1s)) << drained.describe(1s);
  EXPECT_EQ(client->impl().command({"GET", key}).text, other.identity());
}

}  // namespace
}  // namespace fleetcron::redis
