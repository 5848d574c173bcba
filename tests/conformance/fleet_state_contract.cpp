#include "conformance/fleet_state_contract.h"

#include <atomic>
#include <barrier>
#include <optional>
#include <thread>
#include <vector>

#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

namespace {

constexpr auto keep = std::chrono::hours{24};

// An instant on a whole minute, as a cron job's instants are.
Instant minute(int n) {
  static const Instant base = std::chrono::floor<std::chrono::hours>(real_now()) - std::chrono::hours{48};
  return base + std::chrono::minutes{n};
}

std::string job(const char* name) {
  static std::atomic<int> next{0};
  return std::string("contract-") + name + "-" + std::to_string(real_now().time_since_epoch().count()) + "-" +
         std::to_string(next++);
}

JobCursor found(FleetState& state, const std::string& job_key) {
  const CursorRead read = state.read_cursor(job_key);
  EXPECT_EQ(read.status, CursorRead::Status::found) << read.error;
  return read.cursor.value_or(JobCursor{});
}

}  // namespace

TEST_P(FleetStateContract, ACursorIsAbsentUntilWrittenThenReadByEveryReplica) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("absent");
  const CursorRead none = a->read_cursor(key);
  ASSERT_EQ(none.status, CursorRead::Status::absent) << none.error;
  EXPECT_FALSE(none.cursor);
  ASSERT_EQ(a->advance_cursor(key, minute(1), 42, keep).status, CursorAdvance::Status::advanced);
  const JobCursor seen = found(*b, key);
  EXPECT_EQ(seen.instant, minute(1));
  EXPECT_EQ(seen.schedule_digest, 42u);
}

TEST_P(FleetStateContract, AdvancingIsAMaximumAndNeverMovesTheCursorBack) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("max");
  ASSERT_EQ(a->advance_cursor(key, minute(5), 1, keep).status, CursorAdvance::Status::advanced);
  ASSERT_EQ(b->advance_cursor(key, minute(3), 1, keep).status, CursorAdvance::Status::advanced);  // a late replica
  EXPECT_EQ(found(*a, key).instant, minute(5));
  ASSERT_EQ(b->advance_cursor(key, minute(6), 2, keep).status, CursorAdvance::Status::advanced);
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
  ASSERT_EQ(states[0]->advance_cursor(key, minute(0), 7, keep).status, CursorAdvance::Status::advanced);
  const JobCursor seen = found(*states[0], key);
  std::vector<CatchUpClaim> results(replicas);
  std::barrier start(replicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < replicas; ++i) {
    threads.emplace_back([&, i] {
      const auto replica = static_cast<std::size_t>(i);
      start.arrive_and_wait();
      results[replica] = states[replica]->claim_catch_up(key, seen, minute(60), 7, keep);
    });
  }
  for (auto& thread : threads) thread.join();
  int won = 0;
  for (const CatchUpClaim& result : results) {
    if (result.status == CatchUpClaim::Status::claimed) {
      ++won;
    } else {
      ASSERT_EQ(result.status, CatchUpClaim::Status::superseded) << result.error;
      ASSERT_TRUE(result.current);
      EXPECT_EQ(result.current->instant, minute(60));  // the winner's
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(found(*states[0], key).instant, minute(60));
}

TEST_P(FleetStateContract, CatchingUpAJobNewToTheStoreHasOneWinnerToo) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("new");
  const CatchUpClaim first = a->claim_catch_up(key, std::nullopt, minute(10), 3, keep);
  ASSERT_EQ(first.status, CatchUpClaim::Status::claimed) << first.error;
  ASSERT_TRUE(first.current);
  EXPECT_EQ(first.current->instant, minute(10));
  const CatchUpClaim second = b->claim_catch_up(key, std::nullopt, minute(10), 3, keep);
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
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep).status, CursorAdvance::Status::advanced);
  const JobCursor seen = found(*a, key);
  ASSERT_EQ(b->advance_cursor(key, minute(2), 1, keep).status, CursorAdvance::Status::advanced);
  const CatchUpClaim late = a->claim_catch_up(key, seen, minute(30), 1, keep);
  ASSERT_EQ(late.status, CatchUpClaim::Status::superseded) << late.error;
  ASSERT_TRUE(late.current);
  EXPECT_EQ(late.current->instant, minute(2));
  EXPECT_EQ(found(*b, key).instant, minute(2));  // untouched by the loser
  // From what it read now, it may catch up.
  EXPECT_EQ(a->claim_catch_up(key, late.current, minute(30), 1, keep).status, CatchUpClaim::Status::claimed);
}

TEST_P(FleetStateContract, ACursorExpiresKeepForAfterItsLastWrite) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string key = job("expiry");
  const auto keep_for = fleet->short_keep_for();
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep_for).status, CursorAdvance::Status::advanced);
  fleet->let_pass(keep_for / 2);
  ASSERT_EQ(a->advance_cursor(key, minute(1), 1, keep_for).status, CursorAdvance::Status::advanced);  // refreshes
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
  ASSERT_EQ(a->advance_cursor(key, minute(5), 1, keep).status, CursorAdvance::Status::advanced);
  const JobCursor seen = found(*a, key);
  try {
    (void)a->claim_catch_up(key, seen, minute(5), 1, keep);
    FAIL() << "a catch-up to the cursor itself was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not after the cursor"), std::string::npos) << e.what();
  }
}

}  // namespace fleetcron::test
