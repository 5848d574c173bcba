// redis::FleetState beyond the contract (tests/conformance/): what it does
// with a key it did not write, an unreachable server and bad options.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "fleetcron/redis/fleet_state.h"
#include "fleetcron/rfc3339.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/time.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

TEST(RedisFleetState, AKeyHoldingSomethingElseIsAnErrorNamingItAndIsLeftAlone) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  FleetState state(client, {.fleet_prefix = test::unique_prefix() + "fleet:"});
  const std::string key = state.cursor_key("job");
  ASSERT_EQ(client->impl().command({"SET", key, "not a cursor"}).text, "OK");
  const CursorRead read = state.read_cursor("job");
  ASSERT_EQ(read.status, CursorRead::Status::error);
  EXPECT_NE(read.error.find(key), std::string::npos) << read.error;
  const Instant at = test::real_now();
  const CursorAdvance advance = state.advance_cursor("job", at, 1, 1h);
  ASSERT_EQ(advance.status, CursorAdvance::Status::error);
  EXPECT_NE(advance.error.find("NOTCURSOR"), std::string::npos) << advance.error;
  // In a claim batch (one script call), the other cursors still move.
  const std::vector<CursorAdvanceRequest> batch{{"before", at, 1, 1h}, {"job", at, 1, 1h}, {"after", at, 1, 1h}};
  const std::vector<CursorAdvance> answers = state.advance_cursors(batch);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].status, CursorAdvance::Status::moved) << answers[0].error;
  EXPECT_EQ(answers[1].status, CursorAdvance::Status::error);
  EXPECT_NE(answers[1].error.find(key), std::string::npos) << answers[1].error;
  EXPECT_NE(answers[1].error.find("NOTCURSOR"), std::string::npos) << answers[1].error;
  EXPECT_EQ(answers[2].status, CursorAdvance::Status::moved) << answers[2].error;
  EXPECT_EQ(state.advance_cursors(batch)[0].status, CursorAdvance::Status::already_past);
  // A key of another type too (Redis would abort the whole script on WRONGTYPE).
  ASSERT_EQ(client->impl().command({"DEL", key}).type, Reply::Type::integer);
  ASSERT_EQ(client->impl().command({"HSET", key, "field", "value"}).integer, 1);
  // One pipelined read: the hash is an error of its own key alone.
  const std::vector<std::string> keys{"before", "job", "after"};
  const std::vector<CursorRead> reads = state.read_cursors(keys);
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_EQ(reads[0].status, CursorRead::Status::found) << reads[0].error;
  EXPECT_EQ(reads[1].status, CursorRead::Status::error);
  EXPECT_NE(reads[1].error.find("WRONGTYPE"), std::string::npos) << reads[1].error;
  EXPECT_EQ(reads[2].status, CursorRead::Status::found) << reads[2].error;
  const std::vector<CursorAdvance> typed = state.advance_cursors(batch);
  ASSERT_EQ(typed.size(), 3u);
  EXPECT_EQ(typed[0].status, CursorAdvance::Status::already_past) << typed[0].error;
  EXPECT_EQ(typed[1].status, CursorAdvance::Status::error);
  EXPECT_NE(typed[1].error.find("NOTCURSOR"), std::string::npos) << typed[1].error;
  EXPECT_EQ(typed[2].status, CursorAdvance::Status::already_past) << typed[2].error;
  ASSERT_EQ(client->impl().command({"DEL", key}).integer, 1);
  ASSERT_EQ(client->impl().command({"SET", key, "not a cursor"}).text, "OK");
  EXPECT_EQ(state.claim_catch_up("job", std::nullopt, at, 1, 1h, "r").status, CatchUpClaim::Status::error);
  EXPECT_EQ(client->impl().command({"GET", key}).text, "not a cursor");  // nothing overwrote it
}

FireRecord succeeded(const std::string& job_key, Instant at) {
  FireRecord r;
  r.job_key = job_key;
  r.fire_key = job_key + "@" + format_rfc3339(at);
  r.scheduled_at = at;
  r.fate = FireFate::succeeded;
  r.replica_id = "replica-a";
  r.started_at = at;
  r.attempts = 1;
  return r;
}

std::int64_t pttl(Client& client, const std::string& key) { return client.impl().command({"PTTL", key}).integer; }

// One script call writes a batch of records, each alone: a job whose key
// is of another type, or whose fire's field holds garbage, fails its own
// record, and the others are written.
TEST(RedisFleetState, ALedgerBatchWritesEachRecordAlone) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  FleetState state(client, {.fleet_prefix = test::unique_prefix() + "fleet:"});
  const Instant at = std::chrono::floor<std::chrono::seconds>(test::real_now());
  const std::string hashed = state.options().fleet_prefix + "ledger-records:{typed}";
  ASSERT_EQ(client->impl().command({"SET", hashed, "a string"}).text, "OK");
  const FireRecord garbled = succeeded("garbled", at);
  ASSERT_EQ(client->impl().command({"HSET", state.options().fleet_prefix + "ledger-records:{garbled}",
                                    garbled.fire_key, "not a record"}).integer, 1);
  const std::vector<LedgerWrite> batch{{succeeded("before", at), {}}, {succeeded("typed", at), {}},
                                       {garbled, {}}, {succeeded("after", at), {}}};
  const std::vector<LedgerWriteResult> results = state.record_fires(batch);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].status, LedgerWriteResult::Status::written) << results[0].error;
  EXPECT_EQ(results[1].status, LedgerWriteResult::Status::error);
  EXPECT_NE(results[1].error.find("WRONGTYPE"), std::string::npos) << results[1].error;
  EXPECT_NE(results[1].error.find(batch[1].record.fire_key), std::string::npos) << results[1].error;
  EXPECT_EQ(results[2].status, LedgerWriteResult::Status::error);
  EXPECT_NE(results[2].error.find("NOTRECORD"), std::string::npos) << results[2].error;
  EXPECT_EQ(results[3].status, LedgerWriteResult::Status::written) << results[3].error;
  EXPECT_EQ(client->impl().command({"GET", hashed}).text, "a string");  // left as it was
  EXPECT_EQ(client->impl().command({"EXISTS", state.ledger_key("typed")}).integer, 0);  // no index without its record
  for (const char* job : {"before", "after"}) {
    const LedgerRead read = state.read_fires(job, 10);
    ASSERT_EQ(read.status, LedgerRead::Status::found) << read.error;
    ASSERT_EQ(read.records.size(), 1u) << job;
  }
}

// A job's ledger keys live at least keep_for after its last fire added:
// set to keep_for + ledger_life_refresh() when this process has not set
// them for that long, or when the write created them — not on every record.
TEST(RedisFleetState, ALedgersKeysLifeIsSetOnceAWhileNotOnEveryRecord) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  const std::string prefix = test::unique_prefix() + "fleet:";
  FleetState state(client, {.fleet_prefix = prefix});
  EXPECT_EQ(FleetState::ledger_life_refresh(30 * 24h), 1h);
  EXPECT_EQ(FleetState::ledger_life_refresh(10min), 150s);
  const Instant at = std::chrono::floor<std::chrono::seconds>(test::real_now());
  const LedgerRetention retention{.keep_count = 100, .keep_for = 2h};
  const auto write = [&](FleetState& writer, Instant when) {
    const LedgerWrite one{succeeded("lived", when), retention};
    const auto results = writer.record_fires(std::span(&one, 1));
    ASSERT_EQ(results.size(), 1u);
    ASSERT_EQ(results[0].status, LedgerWriteResult::Status::written) << results[0].error;
  };
  const std::string index = state.ledger_key("lived"), records = prefix + "ledger-records:{lived}";
  write(state, at);
  for (const std::string& key : {index, records}) {  // keep_for + 30 min
    EXPECT_GT(pttl(*client, key), std::chrono::milliseconds(2h).count()) << key;
    EXPECT_LE(pttl(*client, key), std::chrono::milliseconds(150min).count()) << key;
  }
  // Set a moment ago by this process: the next fire's record leaves it.
  ASSERT_EQ(client->impl().command({"PERSIST", index}).integer, 1);
  write(state, at + 1s);
  EXPECT_EQ(pttl(*client, index), -1);
  // Another process has not set it: it does.
  FleetState other(client, {.fleet_prefix = prefix});
  write(other, at + 2s);
  EXPECT_GT(pttl(*client, index), std::chrono::milliseconds(2h).count());
  // Keys this write creates (a store that lost them) get their life at once.
  ASSERT_EQ(client->impl().command({"DEL", index, records}).integer, 2);
  write(state, at + 3s);
  EXPECT_GT(pttl(*client, index), std::chrono::milliseconds(2h).count());
  EXPECT_GT(pttl(*client, records), std::chrono::milliseconds(2h).count());
  // A batch whose first record of the job replaces a fire's record (which
  // sets nothing) still sets the life with its new fire.
  FireRecord running = succeeded("lived", at + 10s);
  running.fate = FireFate::running;
  const LedgerWrite started{running, retention};
  ASSERT_EQ(state.record_fires(std::span(&started, 1))[0].status, LedgerWriteResult::Status::written);
  ASSERT_EQ(client->impl().command({"PERSIST", index}).integer, 1);
  FleetState third(client, {.fleet_prefix = prefix});
  const std::vector<LedgerWrite> batch{{succeeded("lived", at + 10s), retention}, {succeeded("lived", at + 11s), retention}};
  for (const auto& result : third.record_fires(batch)) EXPECT_EQ(result.status, LedgerWriteResult::Status::written) << result.error;
  EXPECT_GT(pttl(*client, index), std::chrono::milliseconds(2h).count());
}

// One script call trims at most 1,000 records in all, beyond 8 that each
// record may always trim (docs/redis.md, "Ledger"): a keep lowered by
// thousands sheds the rest with the ledgers' next writes, and a ledger's
// ordinary trim in the same call still happens.
TEST(RedisFleetState, OneLedgerCallTrimsAtMostAThousandRecords) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  FleetState state(client, {.fleet_prefix = test::unique_prefix() + "fleet:"});
  const Instant at = std::chrono::floor<std::chrono::seconds>(test::real_now()) - 1h;
  const LedgerRetention wide{.keep_count = 10'000, .keep_for = 24h}, narrow{.keep_count = 10, .keep_for = 24h};
  const auto write = [&](const std::vector<LedgerWrite>& writes) {
    for (const auto& result : state.record_fires(writes)) {
      ASSERT_EQ(result.status, LedgerWriteResult::Status::written) << result.error;
    }
  };
  const auto kept = [&](const char* job) { return state.read_fires(job, 10'000).records.size(); };
  std::vector<LedgerWrite> filling;
  for (int i = 0; i < 700; ++i) {
    for (const char* job : {"one", "two"}) filling.push_back({succeeded(job, at + std::chrono::seconds(i)), wide});
    if (i < 10) filling.push_back({succeeded("three", at + std::chrono::seconds(i)), narrow});
  }
  ASSERT_NO_FATAL_FAILURE(write(filling));
  ASSERT_EQ(kept("one"), 700u);
  ASSERT_EQ(kept("three"), 10u);
  // One call, keep lowered to 10 on one and two: 691 trimmed of one, 309
  // of two; three, at its keep, still sheds its oldest.
  ASSERT_NO_FATAL_FAILURE(write({{succeeded("one", at + 700s), narrow},
                                 {succeeded("two", at + 700s), narrow},
                                 {succeeded("three", at + 700s), narrow}}));
  EXPECT_EQ(kept("one"), 10u);
  EXPECT_EQ(kept("two"), 392u);
  EXPECT_EQ(kept("three"), 10u);
  ASSERT_NO_FATAL_FAILURE(write({{succeeded("two", at + 701s), narrow}}));
  const LedgerRead two = state.read_fires("two", 10'000);
  ASSERT_EQ(two.records.size(), 10u);
  EXPECT_EQ(two.records.back().scheduled_at, at + 692s) << "the newest ten kept";
}

TEST(RedisFleetState, AnUnreachableServerIsAnErrorResultNotAnException) {
  auto client = std::make_shared<Client>(parse_uri("redis://127.0.0.1:1").connection);
  FleetState state(client);
  const Instant at = test::real_now();
  const CursorRead read = state.read_cursor("job");
  EXPECT_EQ(read.status, CursorRead::Status::error);
  EXPECT_NE(read.error.find("127.0.0.1:1"), std::string::npos) << read.error;
  EXPECT_EQ(state.advance_cursor("job", at, 1, 1h).status, CursorAdvance::Status::error);
  EXPECT_EQ(state.claim_catch_up("job", std::nullopt, at, 1, 1h, "r").status, CatchUpClaim::Status::error);
  const std::vector<std::string> keys{"a", "b"};
  const std::vector<CursorRead> reads = state.read_cursors(keys);
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[1].status, CursorRead::Status::error);
  EXPECT_NE(reads[1].error.find("127.0.0.1:1"), std::string::npos) << reads[1].error;
}

TEST(RedisFleetState, OptionsAreCheckedAndKeysLiveUnderTheFleetPrefix) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  EXPECT_THROW(FleetState(nullptr), std::invalid_argument);
  EXPECT_THROW(FleetState(client, {.fleet_prefix = ""}), std::invalid_argument);
  FleetState state(client);
  EXPECT_EQ(state.options().fleet_prefix, "cron:fleet:");
  EXPECT_EQ(state.cursor_key("nightly"), "cron:fleet:cursor:{nightly}");
}

// Rule 4 (docs/fleet-state.md): a cursor carries the server's replication
// ID, which every restart changes, also one that kept every key; a
// catch-up from a cursor of another epoch runs nothing.
TEST(RedisFleetState, ACursorFromBeforeARestartCatchesNothingUp) {
  const auto dir = std::filesystem::temp_directory_path() / ("fleetcron-cursor-epoch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  test::RedisServer server({.password = "", .extra_args = {"--dir", dir.string(), "--appendonly", "yes"}});
  ClientOptions options = parse_uri(server.uri()).connection;
  options.reconnect_backoff_initial = 1ms;
  options.reconnect_backoff_max = 1ms;
  auto client = std::make_shared<Client>(options);
  FleetState state(client);
  const Instant at = std::chrono::floor<std::chrono::seconds>(test::real_now());
  ASSERT_EQ(state.advance_cursor("job", at, 7, 1h).status, CursorAdvance::Status::moved);
  const std::optional<JobCursor> before = state.read_cursor("job").cursor;
  ASSERT_TRUE(before);
  EXPECT_EQ(before->epoch.size(), 40u) << before->epoch;  // master_replid
  // The same epoch: the compare-and-set wins as ever.
  const CatchUpClaim won = state.claim_catch_up("job", before, at + 1s, 7, 1h, "r1");
  ASSERT_EQ(won.status, CatchUpClaim::Status::claimed) << won.error;
  EXPECT_EQ(won.current->epoch, before->epoch);
  server.stop();
  server.start();  // the append-only file keeps the cursor: only the epoch tells
  CursorRead read;
  for (int attempt = 0; attempt < 100; ++attempt) {  // the first call may meet the dead pooled connection
    read = state.read_cursor("job");
    if (read.status != CursorRead::Status::error) break;
    std::this_thread::sleep_for(2ms);  // past the 1 ms reconnect backoff
  }
  ASSERT_EQ(read.status, CursorRead::Status::found) << read.error;
  EXPECT_EQ(*read.cursor, *won.current);
  const CatchUpClaim refused = state.claim_catch_up("job", read.cursor, at + 5s, 7, 1h, "r2");
  ASSERT_EQ(refused.status, CatchUpClaim::Status::epoch_changed) << refused.error;
  ASSERT_TRUE(refused.current);
  EXPECT_EQ(refused.current->instant, at + 5s);  // it starts again from there, in the new epoch
  EXPECT_EQ(refused.current->claimant, "r2");
  EXPECT_EQ(refused.current->epoch.size(), 40u);
  EXPECT_NE(refused.current->epoch, before->epoch);
  // Any other replica that read the old cursor finds it moved.
  EXPECT_EQ(state.claim_catch_up("job", read.cursor, at + 5s, 7, 1h, "r3").status, CatchUpClaim::Status::superseded);
  // A cursor of an earlier fleetcron (no epoch) is from another epoch too.
  ASSERT_EQ(client->impl().command({"SET", state.cursor_key("old"), "1767322800000000 7 3 -"}).text, "OK");
  const std::optional<JobCursor> old = state.read_cursor("old").cursor;
  ASSERT_TRUE(old);
  EXPECT_TRUE(old->epoch.empty());
  EXPECT_EQ(state.claim_catch_up("old", old, at, 7, 1h, "r1").status, CatchUpClaim::Status::epoch_changed);
  server.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fleetcron::redis
