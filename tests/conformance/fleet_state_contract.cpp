#include "conformance/fleet_state_contract.h"

#include <atomic>
#include <limits>
#include <barrier>
#include <optional>
#include <thread>
#include <vector>

#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

namespace {

constexpr auto keep = std::chrono::hours{24};

Instant minute(int n) { return contract_minute(n); }
std::string job(const char* name) { return contract_job("contract-", name); }

JobCursor found(FleetState& state, const std::string& job_key) {
  const CursorRead read = state.read_cursor(job_key);
  EXPECT_EQ(read.status, CursorRead::Status::found) << read.error;
  return read.cursor.value_or(JobCursor{});
}

}  // namespace

Instant contract_minute(int n) {
  static const Instant base = std::chrono::floor<std::chrono::hours>(real_now()) - std::chrono::hours{48};
  return base + std::chrono::minutes{n};
}

std::string contract_job(std::string_view prefix, std::string_view name) {
  static std::atomic<int> next{0};
  return std::string(prefix) + std::string(name) + "-" + std::to_string(real_now().time_since_epoch().count()) + "-" +
         std::to_string(next++);
}

TEST_P(FleetStateContract, ACursorIsAbsentUntilWrittenThenReadByEveryReplica) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("absent");
  const CursorRead none = a->read_cursor(key);
  ASSERT_EQ(none.status, CursorRead::Status::absent) << none.error;
  EXPECT_FALSE(none.cursor);
  ASSERT_EQ(a->advance_cursor(key, minute(1), 42, keep).status, CursorAdvance::Status::moved);
  const JobCursor seen = found(*b, key);
  EXPECT_EQ(seen.instant, minute(1));
  EXPECT_EQ(seen.schedule_digest, 42u);
}

// read_cursors(): one answer per key, in order, as read_cursor() answers
// each (Redis pipelines them; the others read one by one).
TEST_P(FleetStateContract, SeveralCursorsAreReadInOneCallInTheirOrder) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::vector<std::string> keys{job("batch-1"), job("batch-absent"), job("batch-3")};
  ASSERT_EQ(a->advance_cursor(keys[0], minute(1), 11, keep).status, CursorAdvance::Status::moved);
  ASSERT_EQ(a->advance_cursor(keys[2], minute(3), 33, keep).status, CursorAdvance::Status::moved);
  const std::vector<CursorRead> reads = b->read_cursors(keys);
  ASSERT_EQ(reads.size(), 3u);
  ASSERT_EQ(reads[0].status, CursorRead::Status::found) << reads[0].error;
  EXPECT_EQ(reads[0].cursor->instant, minute(1));
  EXPECT_EQ(reads[0].cursor->schedule_digest, 11u);
  EXPECT_EQ(reads[1].status, CursorRead::Status::absent) << reads[1].error;
  ASSERT_EQ(reads[2].status, CursorRead::Status::found) << reads[2].error;
  EXPECT_EQ(*reads[2].cursor, found(*b, keys[2]));
  EXPECT_TRUE(b->read_cursors({}).empty());
}

TEST_P(FleetStateContract, AdvancingIsAMaximumAndNeverMovesTheCursorBack) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("max");
  ASSERT_EQ(a->advance_cursor(key, minute(5), 1, keep).status, CursorAdvance::Status::moved);
  const CursorAdvance late = b->advance_cursor(key, minute(3), 9, keep);  // a late replica
  ASSERT_EQ(late.status, CursorAdvance::Status::already_past) << late.error;
  ASSERT_TRUE(late.current);
  EXPECT_EQ(late.current->instant, minute(5));
  EXPECT_EQ(late.current->schedule_digest, 1u);  // the digest stays with the instant
  EXPECT_EQ(found(*a, key), *late.current);
  ASSERT_EQ(b->advance_cursor(key, minute(6), 2, keep).status, CursorAdvance::Status::moved);
  const JobCursor now = found(*a, key);
  EXPECT_EQ(now.instant, minute(6));
  EXPECT_EQ(now.schedule_digest, 2u);
}

TEST_P(FleetStateContract, OfReplicasCatchingUpFromOneCursorExactlyOneWins) {
  auto fleet = GetParam().make();
  const std::string key = job("race");
  constexpr int replicas = 8;
  std::vector<std::shared_ptr<FleetState>> states;
  for (int i = 0; i < replicas; ++i) states.push_back(fleet->replica());
  ASSERT_EQ(states[0]->advance_cursor(key, minute(0), 7, keep).status, CursorAdvance::Status::moved);
  const JobCursor seen = found(*states[0], key);
  std::vector<CatchUpClaim> results(replicas);
  std::barrier start(replicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < replicas; ++i) {
    threads.emplace_back([&, i] {
      const auto replica = static_cast<std::size_t>(i);
      start.arrive_and_wait();
      results[replica] = states[replica]->claim_catch_up(key, seen, minute(60), 7, keep, "r" + std::to_string(i));
    });
  }
  for (auto& thread : threads) thread.join();
  int won = 0;
  std::string winner;
  for (const CatchUpClaim& result : results) {
    if (result.status == CatchUpClaim::Status::claimed) {
      ++won;
      ASSERT_TRUE(result.current);
      winner = result.current->claimant;
    } else {
      ASSERT_EQ(result.status, CatchUpClaim::Status::superseded) << result.error;
      ASSERT_TRUE(result.current);
      EXPECT_EQ(result.current->instant, minute(60));  // the winner's
    }
  }
  EXPECT_EQ(won, 1);
  const JobCursor after = found(*states[0], key);
  EXPECT_EQ(after.instant, minute(60));
  EXPECT_EQ(after.claimant, winner);
}

TEST_P(FleetStateContract, CatchingUpAJobNewToTheStoreHasOneWinnerToo) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("new");
  const CatchUpClaim first = a->claim_catch_up(key, std::nullopt, minute(10), 3, keep, "replica");
  ASSERT_EQ(first.status, CatchUpClaim::Status::claimed) << first.error;
  ASSERT_TRUE(first.current);
  EXPECT_EQ(first.current->instant, minute(10));
  const CatchUpClaim second = b->claim_catch_up(key, std::nullopt, minute(10), 3, keep, "replica");
  ASSERT_EQ(second.status, CatchUpClaim::Status::superseded) << second.error;
  ASSERT_TRUE(second.current);
  EXPECT_EQ(second.current->instant, minute(10));
}

TEST_P(FleetStateContract, AnAdvanceSinceTheReadSupersedesTheCatchUp) {
  // A replica passing a later instant moves the cursor between another's
  // read and its catch-up: that catch-up must lose, or it would run
  // instants the fleet already handled.
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("stale");
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep).status, CursorAdvance::Status::moved);
  const JobCursor seen = found(*a, key);
  ASSERT_EQ(b->advance_cursor(key, minute(2), 1, keep).status, CursorAdvance::Status::moved);
  const CatchUpClaim late = a->claim_catch_up(key, seen, minute(30), 1, keep, "replica");
  ASSERT_EQ(late.status, CatchUpClaim::Status::superseded) << late.error;
  ASSERT_TRUE(late.current);
  EXPECT_EQ(late.current->instant, minute(2));
  EXPECT_EQ(found(*b, key).instant, minute(2));  // untouched by the loser
  // From what it read now, it may catch up.
  EXPECT_EQ(a->claim_catch_up(key, late.current, minute(30), 1, keep, "replica").status, CatchUpClaim::Status::claimed);
}

TEST_P(FleetStateContract, ACallerRecognisesItsOwnWinByItsClaimant) {
  // A claim whose answer was lost (an error after the store applied it):
  // the caller asks again and finds its claimant and instant there.
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string key = job("mine");
  ASSERT_EQ(a->claim_catch_up(key, std::nullopt, minute(10), 1, keep, "replica-a").status,
            CatchUpClaim::Status::claimed);
  const CatchUpClaim again = a->claim_catch_up(key, std::nullopt, minute(10), 1, keep, "replica-a");
  ASSERT_EQ(again.status, CatchUpClaim::Status::superseded) << again.error;
  ASSERT_TRUE(again.current);
  EXPECT_EQ(again.current->claimant, "replica-a");
  EXPECT_EQ(again.current->instant, minute(10));
  ASSERT_EQ(a->advance_cursor(key, minute(11), 1, keep).status, CursorAdvance::Status::moved);
  EXPECT_EQ(found(*a, key).claimant, "");  // an advance names no claimant
}

TEST_P(FleetStateContract, EveryFieldRoundTripsAtTheLimitsOfItsType) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("limits");
  const Instant before_epoch = Instant{} - std::chrono::hours{24} - std::chrono::microseconds{7};
  const std::uint64_t digest = std::numeric_limits<std::uint64_t>::max();
  ASSERT_EQ(a->advance_cursor(key, before_epoch + 999ns, digest, keep).status, CursorAdvance::Status::moved);
  const JobCursor read = found(*b, key);
  EXPECT_EQ(read.instant, before_epoch);  // kept to the microsecond, rounded down
  EXPECT_EQ(read.schedule_digest, digest);
  EXPECT_EQ(b->claim_catch_up(key, read, minute(0), digest - 1, keep, "b").status, CatchUpClaim::Status::claimed);
  EXPECT_EQ(found(*a, key).schedule_digest, digest - 1);
}

TEST_P(FleetStateContract, ACursorThatExpiredSinceTheReadSupersedesTheCatchUp) {
  auto fleet = GetParam().make();
  auto a = fleet->replica_for_expiry();
  const std::string key = job("gone");
  const auto keep_for = fleet->short_keep_for();
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep_for).status, CursorAdvance::Status::moved);
  const JobCursor seen = found(*a, key);
  fleet->let_pass(keep_for + keep_for / 4);
  const CatchUpClaim late = a->claim_catch_up(key, seen, minute(30), 1, keep_for, "a");
  ASSERT_EQ(late.status, CatchUpClaim::Status::superseded) << late.error;
  EXPECT_FALSE(late.current);  // absent: the job is new to the store again
}

TEST_P(FleetStateContract, ACursorExpiresKeepForAfterItsLastWrite) {
  auto fleet = GetParam().make();
  auto a = fleet->replica_for_expiry();
  const std::string key = job("expiry");
  const auto keep_for = fleet->short_keep_for();
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep_for).status, CursorAdvance::Status::moved);
  fleet->let_pass(keep_for / 2);
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep_for).status, CursorAdvance::Status::already_past);  // refreshes
  fleet->let_pass(keep_for * 3 / 4);
  EXPECT_EQ(a->read_cursor(key).status, CursorRead::Status::found);  // 5/4 after the first write, 3/4 after the last
  fleet->let_pass(keep_for / 2 + 1ms);
  EXPECT_EQ(a->read_cursor(key).status, CursorRead::Status::absent);
}

TEST_P(FleetStateContract, BadArgumentsAreRefusedTheSameWayEverywhere) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  EXPECT_THROW((void)a->read_cursor(" "), std::invalid_argument);
  EXPECT_THROW((void)a->advance_cursor("job", minute(1), 1, 0ms), std::invalid_argument);
  const std::string key = job("args");
  ASSERT_EQ(a->advance_cursor(key, minute(5), 1, keep).status, CursorAdvance::Status::moved);
  const JobCursor seen = found(*a, key);
  try {
    (void)a->claim_catch_up(key, seen, minute(5), 1, keep, "replica");
    FAIL() << "a catch-up to the cursor itself was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not after the cursor"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)a->claim_catch_up(key, seen, minute(6), 1, keep, "two words"), std::invalid_argument);
  EXPECT_THROW((void)a->claim_catch_up(key, seen, minute(6), 1, keep, ""), std::invalid_argument);
  EXPECT_THROW((void)a->advance_cursor(key, minute(6), 1, max_cursor_keep_for + 1ns), std::invalid_argument);
  EXPECT_THROW((void)a->read_cursor("\n"), std::invalid_argument);
}

}  // namespace fleetcron::test
