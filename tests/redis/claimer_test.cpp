// redis::Claimer against a real redis-server.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include <fmt/format.h>

#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/diagnostics.h"
#include "redis/commands.h"
#include "redis_server.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<Client> shared_client() { return std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection); }

std::string invalid_message(const std::function<void()>& construct) {
  try {
    construct();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(RedisClaimer, OptionsAreValidatedAtConstruction) {
  auto client = shared_client();
  EXPECT_EQ(invalid_message([] { Claimer c(nullptr); }), "redis::Claimer: client is null");
  EXPECT_EQ(invalid_message([&] { Claimer c(client, {.claim_ttl = 999us}); }),
            "redis::ClaimerOptions.claim_ttl: 999us is below the minimum of 1ms");
  EXPECT_EQ(invalid_message([&] { Claimer c(client, {.max_clock_skew = 0s}); }),
            "redis::ClaimerOptions.max_clock_skew: 0s is not positive");
  EXPECT_EQ(invalid_message([&] { Claimer c(client, {.claim_ttl = 10min, .max_clock_skew = 5min}); }),
            "redis::ClaimerOptions.max_clock_skew: 5m0s is not below claim_ttl / 2 (5m0s): two replicas at opposite "
            "ends of the guard could both claim a fire");
  // "No guard" spelt as the largest duration is refused too (review: 2 * skew overflowed).
  EXPECT_NE(invalid_message([&] { Claimer c(client, {.max_clock_skew = std::chrono::nanoseconds::max()}); })
                .find("is not below claim_ttl / 2 (5m0s)"),
            std::string::npos);
  EXPECT_EQ(invalid_message([&] { Claimer c(client, {.skew_refresh_interval = 2h}); }),
            "redis::ClaimerOptions.skew_refresh_interval: 2h0m0s is out of range 1ms..1h");
  Claimer defaults(client);
  EXPECT_EQ(defaults.options().claim_prefix, "cron:claim:");
  EXPECT_EQ(defaults.options().claim_ttl, 10min);
  EXPECT_EQ(defaults.options().max_clock_skew, 150s);  // a quarter of the TTL
  EXPECT_EQ(defaults.dedup_window(), 5min);           // TTL - 2 * skew
  EXPECT_EQ(defaults.options().fence_key, "cron:claim:fence");
  Claimer empty_prefix(client, {.claim_prefix = ""});  // allowed
  EXPECT_EQ(empty_prefix.options().fence_key, "fence");
}

// already_claimed() looks without claiming: one MGET; a Go replica's "1"
// is a claim too; an unreachable server tells nothing.
TEST(RedisClaimer, AlreadyClaimedLooksWithoutClaiming) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix});
  ASSERT_EQ(claimer.claim("a@2026-01-02T15:04:05Z").status, ClaimResult::Status::claimed);
  ASSERT_EQ(client->impl().command({"SET", prefix + "go@2026-01-02T15:04:05Z", "1", "PX", "60000"}).text, "OK");
  const std::vector<std::string> keys{"a@2026-01-02T15:04:05Z", "free@2026-01-02T15:04:05Z", "go@2026-01-02T15:04:05Z"};
  EXPECT_EQ(claimer.already_claimed(keys), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(client->impl().command({"EXISTS", prefix + "free@2026-01-02T15:04:05Z"}).integer, 0);  // not claimed by looking
  EXPECT_EQ(claimer.claim("free@2026-01-02T15:04:05Z").status, ClaimResult::Status::claimed);
  Claimer unreachable(std::make_shared<Client>(parse_uri("redis://127.0.0.1:1").connection));
  EXPECT_TRUE(unreachable.already_claimed(keys).empty());
}

TEST(RedisClaimer, ClaimsOnceKeepsTheKeyForItsTtlAndFencesIncrease) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix, .claim_ttl = 90s});
  const auto first = claimer.claim("report@2026-01-02T15:04:05Z");
  ASSERT_EQ(first.status, ClaimResult::Status::claimed) << first.error;
  EXPECT_EQ(claimer.claim("report@2026-01-02T15:04:05Z").status, ClaimResult::Status::already_claimed);
  const auto second = claimer.claim("report@2026-01-02T15:05:05Z");
  ASSERT_EQ(second.status, ClaimResult::Status::claimed);
  EXPECT_GT(second.fence, first.fence);
  // The fence is at least the server's clock in µs: it survives data loss.
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(first.fence, static_cast<std::uint64_t>(now_us - 60'000'000));
  const Reply ttl = client->impl().command({"PTTL", prefix + "report@2026-01-02T15:04:05Z"});
  EXPECT_GT(ttl.integer, 85'000);
  EXPECT_LE(ttl.integer, 90'000);
  EXPECT_EQ(client->impl().command({"GET", prefix + "report@2026-01-02T15:04:05Z"}).text, std::to_string(first.fence));

  const auto blank = claimer.claim("  ");
  EXPECT_EQ(blank.status, ClaimResult::Status::error);
  EXPECT_EQ(blank.error, "blank fire key");
}

TEST(RedisClaimer, AKeyWrittenByLibtnbCronCountsAsClaimed) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  // libtnb/cron's Claimer: SET prefix+fireKey "1" NX PX ttl.
  ASSERT_EQ(client->impl().command({"SET", prefix + "nightly@2026-03-01T02:00:00Z", "1", "NX", "PX", "600000"}).text, "OK");
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix});
  EXPECT_EQ(claimer.claim("nightly@2026-03-01T02:00:00Z").status, ClaimResult::Status::already_claimed);
}

TEST(RedisClaimer, BatchClaimsEachKeyOnceInOrder) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix});
  std::vector<std::string> keys;
  for (int i = 0; i < 500; ++i) keys.push_back("job" + std::to_string(i) + "@2026-01-01T00:00:00Z");
  keys.push_back("job7@2026-01-01T00:00:00Z");  // a duplicate within the batch: the second loses
  keys.push_back("");
  const auto commands_before = client->stats().commands;
  const auto results = claimer.claim_batch(keys);
  ASSERT_EQ(results.size(), keys.size());
  std::uint64_t previous = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    ASSERT_EQ(results[i].status, ClaimResult::Status::claimed) << i << ": " << results[i].error;
    EXPECT_GT(results[i].fence, previous);  // granted in order
    previous = results[i].fence;
  }
  EXPECT_EQ(results[500].status, ClaimResult::Status::already_claimed);
  EXPECT_EQ(results[501].status, ClaimResult::Status::error);
  // One pipelined round trip (plus SCRIPT LOAD the first time).
  EXPECT_LE(client->stats().commands - commands_before, 502u);
  const auto again = claimer.claim_batch(std::vector<std::string>(keys.begin(), keys.begin() + 10));
  for (const auto& result : again) EXPECT_EQ(result.status, ClaimResult::Status::already_claimed);
}

TEST(RedisClaimer, SkewGuardRefusesWhileTheLocalClockIsTooFarOff) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  auto clock = std::make_shared<VirtualClock>(Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())});
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix, .claim_ttl = 10min, .clock = clock});
  const auto in_sync = claimer.claim("a@2026-01-01T00:00:00Z");
  ASSERT_EQ(in_sync.status, ClaimResult::Status::claimed) << in_sync.error;
  auto offset = claimer.clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 2s);

  clock->jump_wall(-6min);  // the local clock now lags 6 minutes: beyond a quarter of the TTL
  const auto lagging = claimer.claim("b@2026-01-01T00:00:00Z");
  EXPECT_EQ(lagging.status, ClaimResult::Status::clock_skew);
  EXPECT_NE(lagging.error.find("local clock is 6m"), std::string::npos) << lagging.error;
  EXPECT_NE(lagging.error.find("behind the Redis server's, beyond max_clock_skew 2m30s"), std::string::npos)
      << lagging.error;
  EXPECT_TRUE(client->impl().command({"GET", prefix + "b@2026-01-01T00:00:00Z"}).is_nil());  // nothing was claimed
  offset = claimer.clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_GT(offset->offset, 150s);

  clock->jump_wall(12min);  // now 6 minutes ahead
  EXPECT_EQ(claimer.claim("b@2026-01-01T00:00:00Z").status, ClaimResult::Status::clock_skew);
  clock->jump_wall(-6min);
  EXPECT_EQ(claimer.claim("b@2026-01-01T00:00:00Z").status, ClaimResult::Status::claimed);
}

TEST(RedisClaimer, ClockOffsetIsMeasuredWithTimeAndRefreshed) {
  auto client = shared_client();
  auto clock = std::make_shared<VirtualClock>(Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())});
  Claimer claimer(client, {.skew_refresh_interval = 10s, .clock = clock});
  const auto first = claimer.clock_offset();
  ASSERT_TRUE(first);
  clock->jump_wall(1h);
  EXPECT_EQ(claimer.clock_offset()->measured_at, first->measured_at);  // still fresh: not measured again
  clock->advance(11s);
  const auto refreshed = claimer.clock_offset();
  ASSERT_TRUE(refreshed);
  EXPECT_NE(refreshed->measured_at, first->measured_at);
  EXPECT_LT(refreshed->offset, -59min);  // local clock an hour ahead
}

std::string in_an_hour(std::string_view key) {
  return fire_key(key, std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now()) + 1h);
}

// The store's diagnostics, as the daemon reads them: an answer, the
// claimer's clock offset, and the eviction policy as the configuration
// that matters; an unreachable server is an error, not a crash or a hang.
TEST(RedisDiagnostics, AnswerClockOffsetAndThePolicyOfTheRealServer) {
  auto client = shared_client();
  auto claimer = std::make_shared<Claimer>(client, ClaimerOptions{});
  const auto diagnostics = make_diagnostics(client, claimer);
  EXPECT_NO_THROW(diagnostics->ping());
  const auto offset = diagnostics->clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 2s);
  const auto config = diagnostics->check_config();
  ASSERT_TRUE(config);
  EXPECT_TRUE(config->answered);
  EXPECT_FALSE(config->value.empty());
  EXPECT_EQ(config->safe, config->value == "noeviction");
  EXPECT_NE(config->description.find(config->value), std::string::npos) << config->description;
  EXPECT_TRUE(diagnostics->missing_schema().empty()) << "Redis has no schema";
  EXPECT_FALSE(make_diagnostics(client)->clock_offset()) << "no claimer (leader mode): nothing measures";
  EXPECT_THROW((void)make_diagnostics(nullptr), std::invalid_argument);
  const auto down = make_diagnostics(std::make_shared<Client>(parse_uri("redis://127.0.0.1:1/0").connection));
  EXPECT_THROW(down->ping(), BackendError);
  const auto unanswered = down->check_config();
  ASSERT_TRUE(unanswered);
  EXPECT_FALSE(unanswered->answered);
  EXPECT_FALSE(unanswered->safe);
}

TEST(RedisClaimer, ScriptFlushKeepsClaimsAnEmptyRestartIsAStoreReset) {
  test::RedisServer server;  // private: SCRIPT FLUSH and the restart would disturb other tests
  ClientOptions options = parse_uri(server.uri()).connection;
  options.reconnect_backoff_initial = 1ms;
  options.reconnect_backoff_max = 1ms;
  auto client = std::make_shared<Client>(options);
  test::seed_store_epoch(server.uri(), "cron:claim:");
  Claimer claimer(client);
  const auto before = claimer.claim("a@2026-01-01T00:00:00Z");
  ASSERT_EQ(before.status, ClaimResult::Status::claimed) << before.error;
  ASSERT_EQ(client->impl().command({"SCRIPT", "FLUSH"}).text, "OK");
  const auto after_flush = claimer.claim_batch(std::vector<std::string>{"b@2026-01-01T00:00:00Z", "a@2026-01-01T00:00:00Z"});
  ASSERT_EQ(after_flush[0].status, ClaimResult::Status::claimed) << after_flush[0].error;  // NOSCRIPT, then EVAL
  EXPECT_EQ(after_flush[1].status, ClaimResult::Status::already_claimed);
  EXPECT_GT(after_flush[0].fence, before.fence);
  EXPECT_EQ(claimer.resets_found(), 0u);
  // A restart without persistence loses every key: "a" could be claimed
  // again. The first claim finds the epoch record gone and refuses every
  // fire scheduled before the new epoch + max_clock_skew; later fires are
  // claimed, with fences that still grow.
  server.stop();
  server.start();
  ClaimResult again;
  for (int attempt = 0; attempt < 100; ++attempt) {  // the first call may meet the dead pooled connection
    again = claimer.claim("a@2026-01-01T00:00:00Z");
    if (again.status != ClaimResult::Status::error) break;
    std::this_thread::sleep_for(2ms);  // past the 1 ms reconnect backoff
  }
  ASSERT_EQ(again.status, ClaimResult::Status::store_reset) << again.error;
  EXPECT_NE(again.error.find("scheduled before the claim store's reset epoch 20"), std::string::npos) << again.error;
  EXPECT_NE(again.error.find("+ max_clock_skew 2m30s"), std::string::npos) << again.error;
  EXPECT_EQ(claimer.resets_found(), 1u);
  // Written anyway (value 0), so a libtnb/cron replica sees it taken.
  EXPECT_EQ(client->impl().command({"GET", "cron:claim:a@2026-01-01T00:00:00Z"}).text, "0");
  const auto soon = claimer.claim(fire_key("c", std::chrono::time_point_cast<std::chrono::seconds>(
                                                    std::chrono::system_clock::now()) + 1min));
  EXPECT_EQ(soon.status, ClaimResult::Status::store_reset) << "inside the skew bound after the epoch";
  const auto later = claimer.claim(in_an_hour("c"));
  ASSERT_EQ(later.status, ClaimResult::Status::claimed) << later.error;
  EXPECT_GT(later.fence, after_flush[0].fence);
  EXPECT_EQ(claimer.resets_found(), 1u);  // found once
}

// `fleetcron init` (docs/redis.md, "A new store"): a store declared new
// claims the fires of its first max_clock_skew, which an undeclared new
// store refuses as after a reset; a later loss is still detected, and a
// store holding claims without an epoch is not declared new.
TEST(RedisClaimer, ADeclaredNewStoreClaimsItsFirstFiresAndStillDetectsALaterReset) {
  using Status = NewStoreDeclaration::Status;
  auto client = shared_client();
  const std::string now_key =
      fire_key("job", std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now()));
  Claimer guessed(client, {.claim_prefix = test::unique_prefix()});
  EXPECT_EQ(guessed.claim(now_key).status, ClaimResult::Status::store_reset)
      << "undeclared, a new store is taken for one that lost its data";
  const std::string prefix = test::unique_prefix();
  Claimer claimer(client, {.claim_prefix = prefix});
  const NewStoreDeclaration declared = claimer.declare_new_store();
  ASSERT_EQ(declared.status, Status::declared);
  EXPECT_TRUE(declared.found.starts_with("1 ")) << declared.found;
  EXPECT_EQ(claimer.declare_new_store().status, Status::has_epoch) << "idempotent";
  const ClaimResult first = claimer.claim(now_key);
  EXPECT_EQ(first.status, ClaimResult::Status::claimed) << first.error;
  EXPECT_EQ(claimer.resets_found(), 0u);
  // The data lost later (an empty restart, FLUSHALL): detected as before.
  ASSERT_EQ(client->impl().command({"DEL", prefix + "epoch", prefix + now_key}).integer, 2);
  Claimer restarted(client, {.claim_prefix = prefix});
  EXPECT_EQ(restarted.claim(now_key).status, ClaimResult::Status::store_reset);
  EXPECT_EQ(restarted.resets_found(), 1u);
  // A store with claims (a fence counter) but no epoch record is not new.
  ASSERT_EQ(client->impl().command({"DEL", prefix + "epoch"}).integer, 1);
  const NewStoreDeclaration refused = restarted.declare_new_store();
  EXPECT_EQ(refused.status, Status::holds_claims);
  EXPECT_FALSE(refused.found.empty());
  EXPECT_EQ(client->impl().command({"EXISTS", prefix + "epoch"}).integer, 0) << "nothing written";
}

TEST(RedisClaimer, AStoreThatWentBackIsAResetForEveryReplica) {
  // A failover to a replica that lacks the last writes, modelled on one
  // server: the fence counter goes back below what a claimer saw, the
  // epoch record and the server identity stay.
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer a(client, {.claim_prefix = prefix});
  Claimer b(client, {.claim_prefix = prefix});
  const auto granted = a.claim("job@2026-01-01T00:00:00Z");
  ASSERT_EQ(granted.status, ClaimResult::Status::claimed) << granted.error;
  EXPECT_EQ(b.claim("job@2026-01-01T00:00:00Z").status, ClaimResult::Status::already_claimed);  // b saw the fence
  ASSERT_EQ(client->impl().command({"SET", prefix + "fence", "5"}).text, "OK");  // the writes are lost
  ASSERT_EQ(client->impl().command({"DEL", prefix + "job@2026-01-01T00:00:00Z"}).integer, 1);
  const auto replayed = b.claim("job@2026-01-01T00:00:00Z");
  ASSERT_EQ(replayed.status, ClaimResult::Status::store_reset) << replayed.error;
  EXPECT_EQ(b.resets_found(), 1u);
  // a sees the new epoch: the same answer, atomically with the record.
  EXPECT_EQ(a.claim("other@2026-01-01T00:00:00Z").status, ClaimResult::Status::store_reset);
  EXPECT_EQ(a.resets_found(), 0u);
  // The fence counter is back above every fence handed out.
  const auto later = a.claim(in_an_hour("job"));
  ASSERT_EQ(later.status, ClaimResult::Status::claimed) << later.error;
  EXPECT_GT(later.fence, granted.fence);
}

TEST(RedisClaimer, TwoClaimersFindingOneResetAgreeOnTheEpoch) {
  auto client = shared_client();
  const std::string prefix = test::unique_prefix();  // no epoch record: a new or flushed store
  Claimer a(client, {.claim_prefix = prefix});
  Claimer b(client, {.claim_prefix = prefix});
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back(fmt::format("k{}@2026-01-01T00:00:00Z", i));
  keys.push_back(in_an_hour("k"));
  std::vector<ClaimResult> ra, rb;
  std::thread ta([&] { ra = a.claim_batch(keys); });
  std::thread tb([&] { rb = b.claim_batch(keys); });
  ta.join();
  tb.join();
  EXPECT_EQ(a.resets_found() + b.resets_found(), 1u);  // one call found it, the other read its epoch
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    EXPECT_EQ(ra[i].status, ClaimResult::Status::store_reset) << i;
    EXPECT_EQ(rb[i].status, ClaimResult::Status::store_reset) << i;
    EXPECT_EQ(ra[i].error, rb[i].error);  // the same epoch
  }
  EXPECT_EQ((ra.back().status == ClaimResult::Status::claimed) + (rb.back().status == ClaimResult::Status::claimed), 1);
}

TEST(RedisClaimer, RefusedScriptLoadIsAnErrorResult) {
  test::RedisServer server(test::RedisServer::Options{.password = "p4ss", .extra_args = {}});
  Claimer claimer(std::make_shared<Client>(parse_uri(server.uri()).connection));  // no password
  const auto result = claimer.claim("k@2026-01-01T00:00:00Z");
  EXPECT_EQ(result.status, ClaimResult::Status::error);
  // NOAUTH, or (the call has more than ten arguments) Redis's refusal of
  // an unauthenticated multibulk: either names the missing authentication.
  EXPECT_TRUE(result.error.find("NOAUTH") != std::string::npos ||
              result.error.find("unauthenticated") != std::string::npos)
      << result.error;
}

TEST(RedisClaimer, FailuresAreErrorResultsNamingTheServerNotExceptions) {
  const auto port = test::free_port();
  auto client = std::make_shared<Client>(parse_uri("redis://:pw@127.0.0.1:" + std::to_string(port)).connection);
  Claimer claimer(client);
  const auto result = claimer.claim("k@2026-01-01T00:00:00Z");
  EXPECT_EQ(result.status, ClaimResult::Status::error);
  EXPECT_NE(result.error.find("redis://:***@127.0.0.1:" + std::to_string(port)), std::string::npos) << result.error;
  const auto batch = claimer.claim_batch(std::vector<std::string>{"a@x", "b@x"});
  for (const auto& r : batch) EXPECT_EQ(r.status, ClaimResult::Status::error);
}

}  // namespace
}  // namespace fleetcron::redis
