// nats::Connection and Bucket against real nats-server processes, plus the
// key encoding (no server).
#include <gtest/gtest.h>

#include <iostream>

#include <set>
#include <span>
#include <thread>

#include "fleetcron/nats/coordination.h"
#include "fleetcron/nats/diagnostics.h"
#include "nats_server.h"
#include "support/pace_probe.h"

namespace fleetcron::nats {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<Connection> connect(const std::string& url) {
  ConnectionOptions options;
  options.servers = {url};
  options.request_timeout = 1000ms;
  options.connect_timeout = 1000ms;
  return Connection::connect(options);
}

std::string invalid(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(NatsOptions, ValidateAndDescribeWithoutSecrets) {
  ConnectionOptions options;
  options.servers.clear();
  EXPECT_EQ(invalid([&] { validate(options); }), "nats::ConnectionOptions.servers: empty");
  options = {};
  options.token = "t0ken";
  options.user = "u";
  EXPECT_EQ(invalid([&] { validate(options); }),
            "nats::ConnectionOptions: give one of user/password, token, credentials_file, nkey_seed_file");
  options = {};
  options.request_timeout = 0ms;
  EXPECT_EQ(invalid([&] { validate(options); }), "nats::ConnectionOptions.request_timeout: 0s is out of range 1ms..1h");
  options = {};
  options.servers = {"nats://a:1", "nats://bob:hunter2@b:2"};
  options.user = "cron";
  options.password = "s3cret";
  const std::string text = describe(options);
  EXPECT_EQ(text, "nats://a:1,nats://***@b:2 (user cron)");
}

TEST(NatsKeys, EncodingIsValidInjectiveAndStable) {
  EXPECT_EQ(encode_key("job@2026-01-02T15:04:05.5Z"), "job=402026-01-02T15=3A04=3A05=2E5Z");
  EXPECT_EQ(encode_key("a=b"), "a=3Db");
  EXPECT_EQ(encode_key("x.y z"), "x=2Ey=20z");
  EXPECT_EQ(encode_key("caf\xC3\xA9"), "caf=C3=A9");  // bytes above 0x7F: encoded whatever the locale
  // Distinct fire keys stay distinct, including ones that look encoded.
  std::set<std::string> seen;
  for (const char* key : {"a=40b", "a@b", "a=3D40b", "a.b", "a=2Eb", "a_b", "a-b", "a/b"}) {
    EXPECT_TRUE(seen.insert(encode_key(key)).second) << key;
  }
}

TEST(NatsBucket, CreateUpdateGetRemoveSemantics) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 60s});
  EXPECT_EQ(bucket->ttl(), 60s);
  const auto first = bucket->create("k", "a");
  ASSERT_TRUE(first);
  EXPECT_FALSE(bucket->create("k", "b"));               // taken
  EXPECT_FALSE(bucket->update("k", "b", *first + 99));  // stale revision
  const auto second = bucket->update("k", "b", *first);
  ASSERT_TRUE(second);
  EXPECT_GT(*second, *first);
  const auto entry = bucket->get("k");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->value, "b");
  EXPECT_EQ(entry->revision, *second);
  bucket->remove("k");
  EXPECT_FALSE(bucket->get("k"));
  EXPECT_TRUE(bucket->create("k", "c"));  // over the delete marker
  EXPECT_FALSE(bucket->update("k", "d", 0));  // 0: only if absent, and it is not
  EXPECT_EQ(bucket->get("k")->value, "c");
  EXPECT_TRUE(bucket->update("fresh", "e", 0));
  EXPECT_THROW((void)bucket->create("bad key!", "x"), BackendError);
  // Read from the stream's leader, or (a backslash, which nats.c would put
  // into its request unescaped) by nats.c's own get: the same answers.
  for (const std::string key : {"plain.key", "back\\slash"}) {
    EXPECT_FALSE(bucket->get(key)) << key;
    const std::uint64_t put = bucket->put(key, "v");
    const auto read = bucket->get(key);
    ASSERT_TRUE(read) << key;
    EXPECT_EQ(read->value, "v");
    EXPECT_EQ(read->revision, put);
    EXPECT_EQ(read->key, key);
    bucket->remove(key);
    EXPECT_FALSE(bucket->get(key)) << key;
  }
  EXPECT_EQ(bucket->replicas(), 1);
}

TEST(NatsBucket, AnExistingBucketWithADifferentConfigurationIsAClearError) {
  auto connection = connect(test::shared_nats_url());
  const std::string name = test::unique_bucket();
  (void)connection->bucket(BucketConfig{.name = name, .ttl = 60s});
  (void)connection->bucket(BucketConfig{.name = name, .ttl = 60s});  // same: binds
  try {
    (void)connection->bucket(BucketConfig{.name = name, .ttl = 10min});
    FAIL() << "a different TTL was accepted";
  } catch (const BackendError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bucket " + name + " exists with TTL 1m0s, history 1, replicas 1; wanted TTL 10m0s"),
              std::string::npos)
        << message;
  }
  EXPECT_THROW((void)connection->bucket(std::string("NO_SUCH_BUCKET_") + name), BackendError);
  EXPECT_EQ(invalid([&] { (void)connection->bucket(BucketConfig{.name = "x", .history = 0}); }),
            "nats::BucketConfig.history: 0 is out of range 1..64");
}

// Review: an empty NATS_ERR from create was read as "taken", so a
// JetStream that refuses new keys (store full, account limits) would have
// made every fire a silent already-claimed on every replica.
TEST(NatsClaimer, AFullJetStreamStoreIsAClaimErrorNotAlreadyClaimed) {
  test::NatsServer server({.config = "jetstream {\n  max_file_store: 262144\n  max_memory_store: 262144\n}\n"});
  auto connection = Connection::connect({.servers = {server.url()}});
  auto bucket = connection->bucket(BucketConfig{.name = "FULL", .ttl = 10min});
  Claimer claimer(bucket);
  const std::string filler(2000, 'x');
  ClaimResult last;
  int claimed = 0;
  for (int i = 0; i < 2000; ++i) {
    last = claimer.claim("k" + filler + "@" + std::to_string(i));
    if (last.status != ClaimResult::Status::claimed) break;
    ++claimed;
  }
  EXPECT_GT(claimed, 0);
  ASSERT_NE(last.status, ClaimResult::Status::claimed) << "the store never filled";
  EXPECT_EQ(last.status, ClaimResult::Status::error) << "a refused write must not look like another replica's claim";
  EXPECT_FALSE(last.error.empty());
  EXPECT_NE(last.error.find("store full"), std::string::npos) << last.error.substr(last.error.size() - 160);
  std::cerr << "full store: " << claimed << " claims, then: …" << last.error.substr(last.error.size() - 120) << "\n";
}

TEST(NatsConnection, WrongCredentialsAndUnreachableServersAreErrors) {
  // connect() does not wait for the network (as redis::Client): the first
  // request connects, and its error says why it cannot.
  test::NatsServer server(test::NatsServer::Options{.user = "cron", .password = "right-pass"});
  ConnectionOptions options;
  options.servers = {server.url()};
  options.user = "cron";
  options.password = "wrong-pass";
  options.max_reconnects = 0;
  auto refused = Connection::connect(options);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the attempt, then the wait before the next one
    try {
      (void)refused->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 60s})->get("k");
      FAIL() << "wrong password accepted";
    } catch (const BackendError& e) {
      const std::string message = e.what();
      EXPECT_EQ(e.kind(), BackendError::Kind::auth) << message;
      EXPECT_NE(message.find("(user cron): connect"), std::string::npos) << message;
      EXPECT_NE(message.find("Authentication Violation"), std::string::npos) << message;
      EXPECT_EQ(message.find("wrong-pass"), std::string::npos) << message;
    }
  }
  EXPECT_FALSE(refused->connected());
  options.password = "right-pass";
  auto accepted = Connection::connect(options);
  EXPECT_NO_THROW((void)accepted->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 60s})->get("k"));
  EXPECT_TRUE(accepted->connected());

  ConnectionOptions nowhere;
  nowhere.servers = {"nats://127.0.0.1:1"};
  nowhere.max_reconnects = 0;
  const test::PaceProbe started;
  auto unreachable = Connection::connect(nowhere);
  try {
    (void)unreachable->bucket("ANY")->get("k");
    FAIL() << "an unreachable server answered";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind(), BackendError::Kind::connect) << e.what();
  }
  EXPECT_TRUE(started.within(5s)) << started.describe(5s);
}

std::string in_an_hour(std::string_view key) {
  return fire_key(key, std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now()) + 1h);
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(NatsClaimer, FirstWriterWinsFencesAreServerMicrosecondsAndTheBucketNeedsATtl) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 10min});
  Claimer a(bucket), b(bucket);
  EXPECT_EQ(a.claim_ttl(), 10min);
  EXPECT_EQ(a.max_clock_skew(), 150s);  // TTL / 4, as Redis
  EXPECT_EQ(a.dedup_window(), 5min);    // TTL - 2 * skew, as Redis
  const std::string report = in_an_hour("report");
  const auto first = a.claim(report);
  ASSERT_EQ(first.status, ClaimResult::Status::claimed) << first.error;
  EXPECT_EQ(b.claim(report).status, ClaimResult::Status::already_claimed);
  const auto second = b.claim(in_an_hour("report-2"));
  ASSERT_EQ(second.status, ClaimResult::Status::claimed);
  EXPECT_GT(second.fence, first.fence);
  // The fence is the write's server time in µs (docs/fencing.md).
  EXPECT_LT(std::llabs(static_cast<long long>(first.fence) - now_us()), 60'000'000LL) << first.fence;
  EXPECT_TRUE(bucket->get(encode_key(report)));
  EXPECT_EQ(a.claim(" ").status, ClaimResult::Status::error);
  const auto too_long = a.claim(std::string(1000, '@') + "@2026-01-01T00:00:00Z");  // 3 bytes per '@' encoded
  EXPECT_EQ(too_long.status, ClaimResult::Status::error);
  EXPECT_NE(too_long.error.find("above the 2048-byte limit"), std::string::npos) << too_long.error;
  auto forever = connection->bucket(BucketConfig{.name = test::unique_bucket()});
  EXPECT_NE(invalid([&] { Claimer c(forever); }).find("has no TTL, so claims would never expire"), std::string::npos);
  EXPECT_NE(invalid([&] { Claimer c(bucket, ClaimerOptions{.max_clock_skew = 5min}); })
                .find("nats::ClaimerOptions.max_clock_skew: 5m0s is not below the bucket TTL / 2 (5m0s)"),
            std::string::npos);
  EXPECT_NE(invalid([&] { Claimer c(bucket, ClaimerOptions{.max_clock_skew = 0s}); }).find("is not positive"),
            std::string::npos);
}

TEST(NatsClaimer, FiresFromBeforeTheBucketsCreationAreAStoreReset) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1min});
  Claimer claimer(bucket);  // skew guard 15 s
  const auto old = claimer.claim("job@2026-01-01T00:00:00Z");
  ASSERT_EQ(old.status, ClaimResult::Status::store_reset) << old.error;
  EXPECT_NE(old.error.find("scheduled before bucket " + bucket->name() + "'s creation 20"), std::string::npos) << old.error;
  EXPECT_NE(old.error.find("+ max_clock_skew 15s"), std::string::npos) << old.error;
  // Written anyway: another replica's claim of it is refused as taken.
  EXPECT_EQ(Claimer(bucket).claim("job@2026-01-01T00:00:00Z").status, ClaimResult::Status::already_claimed);
  EXPECT_EQ(claimer.claim(in_an_hour("job")).status, ClaimResult::Status::claimed);
}

TEST(NatsClaimer, ADeletedBucketIsRecreatedAndItsOldFiresAreNotClaimedAgain) {
  auto connection = connect(test::shared_nats_url());
  const std::string name = test::unique_bucket();
  auto bucket = connection->bucket(BucketConfig{.name = name, .ttl = 1min});
  Claimer claimer(bucket);  // skew guard 15 s
  // Due in 15 s: a replica up to the guard ahead may claim it now. The
  // bucket is older than that, so the claim is granted.
  const std::string late = fire_key("job", Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())} + 15s);
  const auto granted = claimer.claim(late);
  ASSERT_EQ(granted.status, ClaimResult::Status::claimed) << granted.error;
  connection->delete_bucket(name);  // the volume lost, or someone deleted it
  const auto again = claimer.claim(late);
  ASSERT_EQ(again.status, ClaimResult::Status::store_reset) << again.error;
  EXPECT_EQ(claimer.buckets_recreated(), 1u);
  EXPECT_EQ(bucket->ttl(), 1min);  // recreated with the configuration it was bound with
  const auto later = claimer.claim(in_an_hour("job"));
  ASSERT_EQ(later.status, ClaimResult::Status::claimed) << later.error;
  EXPECT_GT(later.fence, granted.fence);  // fences keep growing across the recreation
}

// The real clocks, with the wall clock moved by `offset`.
class OffsetClock final : public Clock {
 public:
  Instant now() const noexcept override { return system_clock()->now() + offset.load(); }
  SteadyTime steady_now() const noexcept override { return system_clock()->steady_now() + steady_offset.load(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override {
    system_clock()->wait_until(cv, lock, deadline);
  }
  std::atomic<std::chrono::nanoseconds> offset{std::chrono::nanoseconds{0}};
  std::atomic<std::chrono::nanoseconds> steady_offset{std::chrono::nanoseconds{0}};  // moves time on without waiting
};

// The store's diagnostics, as the daemon reads them: an answer and the
// claimer's clock offset; NATS has no configuration or schema to check.
TEST(NatsDiagnostics, AnswerAndClockOffsetOfTheRealServer) {
  auto connection = connect(test::shared_nats_url());
  auto claimer = std::make_shared<Claimer>(connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1min}));
  const auto diagnostics = make_diagnostics(connection, claimer);
  EXPECT_NO_THROW(diagnostics->ping());
  const auto offset = diagnostics->clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 2s);
  EXPECT_FALSE(diagnostics->check_config());
  EXPECT_TRUE(diagnostics->missing_schema().empty());
  EXPECT_FALSE(make_diagnostics(connection)->clock_offset()) << "no claimer (leader mode): nothing measures";
  EXPECT_THROW((void)make_diagnostics(nullptr), std::invalid_argument);
}

TEST(NatsClaimer, TheSkewGuardMeasuresTheServersWriteTimestamps) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1min});
  auto clock = std::make_shared<OffsetClock>();
  // A long refresh interval: between claims only a granted claim's own
  // write measures again.
  Claimer claimer(bucket, ClaimerOptions{.max_clock_skew = 5s, .skew_refresh_interval = 1h, .clock = clock});
  const auto offset = claimer.clock_offset();  // the first measurement: a probe write
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 2s);
  EXPECT_TRUE(bucket->get(claimer.probe_key()));
  EXPECT_EQ(claimer.claim(in_an_hour("in-sync")).status, ClaimResult::Status::claimed);
  // The local clock jumps 30 s ahead: the next claim's own write shows it.
  // Its key stays written (lost, not run, and not run by anyone else).
  clock->offset = 30s;
  const std::string jumped = in_an_hour("jumped");
  const auto after_jump = claimer.claim(jumped);
  EXPECT_EQ(after_jump.status, ClaimResult::Status::clock_skew);
  EXPECT_NE(after_jump.error.find("ahead of the NATS server's, beyond max_clock_skew 5s"), std::string::npos)
      << after_jump.error;
  EXPECT_NE(after_jump.error.find("not run"), std::string::npos) << after_jump.error;
  EXPECT_TRUE(bucket->get(encode_key(jumped)));
  // Known to be off: refused before writing anything.
  const std::string next = in_an_hour("next");
  EXPECT_EQ(claimer.claim(next).status, ClaimResult::Status::clock_skew);
  EXPECT_FALSE(bucket->get(encode_key(next)));
}

TEST(NatsClaimer, AStaleMeasurementIsRefreshedByAProbeWriteBeforeClaiming) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1min});
  auto clock = std::make_shared<OffsetClock>();
  Claimer claimer(bucket, ClaimerOptions{.max_clock_skew = 5s, .skew_refresh_interval = 1ms, .clock = clock});
  clock->offset = -30s;  // lagging
  clock->steady_offset = 1s;  // past the refresh interval
  const std::string lagging = in_an_hour("lagging");
  const auto refused = claimer.claim(lagging);
  EXPECT_EQ(refused.status, ClaimResult::Status::clock_skew);
  EXPECT_NE(refused.error.find("behind the NATS server's"), std::string::npos) << refused.error;
  EXPECT_FALSE(bucket->get(encode_key(lagging)));  // the probe found it, nothing claimed
  clock->offset = 0s;
  clock->steady_offset = 2s;
  EXPECT_EQ(claimer.claim(lagging).status, ClaimResult::Status::claimed);
}

TEST(NatsClaimer, ABatchClaimsEachKeyOnceInOrderWithDistinctFences) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 10min});
  Claimer a(bucket), b(bucket);
  const std::string single = in_an_hour("single");  // once: the keys below may be made in the next second
  const auto before = a.claim(single);               // claimed one at a time, then in a batch
  ASSERT_EQ(before.status, ClaimResult::Status::claimed) << before.error;
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) keys.push_back(in_an_hour("job" + std::to_string(i)));  // three round trips
  keys.push_back(keys[7]);                                                              // a repeat
  keys.push_back(single);
  keys.push_back(" ");
  const auto results = a.claim_batch(keys);
  ASSERT_EQ(results.size(), keys.size());
  std::set<std::uint64_t> fences;
  for (std::size_t i = 0; i < 2500; ++i) {
    ASSERT_EQ(results[i].status, ClaimResult::Status::claimed) << i << ": " << results[i].error;
    EXPECT_GT(results[i].fence, before.fence);
    fences.insert(results[i].fence);
  }
  EXPECT_EQ(fences.size(), 2500u);  // distinct
  EXPECT_EQ(results[2500].status, ClaimResult::Status::already_claimed);  // the repeat
  EXPECT_EQ(results[2501].status, ClaimResult::Status::already_claimed);  // claimed before the batch
  EXPECT_EQ(results[2502].status, ClaimResult::Status::error);
  EXPECT_LT(std::llabs(static_cast<long long>(results[0].fence) - now_us()), 60'000'000LL);
  // Another replica's batch, and its single claims, find every key taken.
  for (const auto& result : b.claim_batch(std::span<const std::string>(keys).first(2500))) {
    EXPECT_EQ(result.status, ClaimResult::Status::already_claimed);
  }
  EXPECT_EQ(b.claim(keys[1234]).status, ClaimResult::Status::already_claimed);
  // The batch measured the clock offset.
  const auto offset = a.clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 5s);
  // Fences are the writes' server times: a later claim's is above them all.
  const auto after = b.claim(in_an_hour("after"));
  EXPECT_GT(after.fence, *fences.rbegin());
}

TEST(NatsClaimer, ABatchRecreatesADeletedBucketAndRefusesItsOldFiresAsAStoreReset) {
  auto connection = connect(test::shared_nats_url());
  const std::string name = test::unique_bucket();
  auto bucket = connection->bucket(BucketConfig{.name = name, .ttl = 1min});
  Claimer claimer(bucket);  // skew guard 15 s
  const std::string soon = fire_key("job", Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())} + 15s);
  const std::vector<std::string> keys{soon, in_an_hour("other")};
  ASSERT_EQ(claimer.claim_batch(keys)[0].status, ClaimResult::Status::claimed);
  connection->delete_bucket(name);
  const auto again = claimer.claim_batch(keys);
  EXPECT_EQ(again[0].status, ClaimResult::Status::store_reset) << again[0].error;
  EXPECT_EQ(again[1].status, ClaimResult::Status::claimed) << again[1].error;  // created after the recreation
  EXPECT_EQ(claimer.buckets_recreated(), 1u);
}

TEST(NatsClaimer, ABatchWrittenByASkewedReplicaIsRefusedAndNotRun) {
  auto connection = connect(test::shared_nats_url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 10min});
  auto clock = std::make_shared<OffsetClock>();
  Claimer claimer(bucket, ClaimerOptions{.clock = clock});
  std::vector<std::string> keys{in_an_hour("a"), in_an_hour("b"), in_an_hour("c")};
  ASSERT_EQ(claimer.claim_batch(std::vector<std::string>{in_an_hour("warm")})[0].status, ClaimResult::Status::claimed);
  clock->offset = -10min;  // the measurement is fresh: the batch is written, then each write found skewed
  for (const auto& result : claimer.claim_batch(keys)) {
    EXPECT_EQ(result.status, ClaimResult::Status::clock_skew);
    EXPECT_NE(result.error.find("behind the NATS server's, beyond max_clock_skew 2m30s"), std::string::npos) << result.error;
    EXPECT_NE(result.error.find("; not run)"), std::string::npos) << result.error;
  }
  // The written keys stay taken; the next batch is refused before writing.
  const std::string d = in_an_hour("d");
  EXPECT_EQ(claimer.claim_batch(std::vector<std::string>{d})[0].status, ClaimResult::Status::clock_skew);
  EXPECT_FALSE(bucket->get(encode_key(d)));
}

TEST(NatsClaimer, ABatchOnAStoppedServerFailsEveryKeyClosed) {
  test::NatsServer server;
  auto connection = connect(server.url());
  auto bucket = connection->bucket(BucketConfig{.name = test::unique_bucket(), .ttl = 1min});
  Claimer claimer(bucket);
  ASSERT_EQ(claimer.claim(in_an_hour("warm")).status, ClaimResult::Status::claimed);
  server.pause();
  const auto results = claimer.claim_batch(std::vector<std::string>{in_an_hour("a"), in_an_hour("b")});
  server.resume();
  for (const auto& result : results) {
    EXPECT_EQ(result.status, ClaimResult::Status::error);
    EXPECT_NE(result.error.find("no acknowledgment within the request timeout"), std::string::npos) << result.error;
  }
}

}  // namespace
}  // namespace fleetcron::nats
