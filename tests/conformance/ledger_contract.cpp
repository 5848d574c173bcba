// The run ledger's part of the fleet-state contract (docs/fleet-state.md),
// instantiated for every backend with the rest of FleetStateContract.
#include <atomic>
#include <barrier>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "conformance/fleet_state_contract.h"
#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

namespace {

Instant minute(int n) { return contract_minute(n); }
std::string job(const char* name) { return contract_job("ledger-", name); }

FireRecord record(const std::string& job_key, int at, FireFate fate, const char* replica = "replica-a") {
  FireRecord r;
  r.job_key = job_key;
  r.fire_key = job_key + "@minute-" + std::to_string(at);
  r.scheduled_at = minute(at);
  r.fate = fate;
  r.replica_id = replica;
  if (fate == FireFate::skipped) r.reason = "claim-error";
  if (ledger_rank(r) >= 3) {
    r.started_at = minute(at) + 1s;
    r.attempts = 1;
  }
  return r;
}

LedgerWriteResult::Status write(FleetState& state, const FireRecord& r, LedgerRetention retention = {}) {
  const LedgerWrite one{r, retention};
  const auto results = state.record_fires(std::span(&one, 1));
  EXPECT_EQ(results.size(), 1u);
  EXPECT_NE(results.front().status, LedgerWriteResult::Status::error) << results.front().error;
  return results.front().status;
}

std::vector<FireRecord> read(FleetState& state, const std::string& job_key, std::size_t limit = 100) {
  LedgerRead out = state.read_fires(job_key, limit);
  EXPECT_EQ(out.status, LedgerRead::Status::found) << out.error;
  return out.records;
}

std::vector<Instant> instants(const std::vector<FireRecord>& records) {
  std::vector<Instant> out;
  for (const auto& r : records) out.push_back(r.scheduled_at);
  return out;
}

}  // namespace

TEST_P(FleetStateContract, ALedgerIsReadNewestFirstByEveryReplica) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("order");
  EXPECT_TRUE(read(*b, key).empty());  // a job with no ledger yet
  for (int at : {1, 3, 2}) ASSERT_EQ(write(*a, record(key, at, FireFate::succeeded)), LedgerWriteResult::Status::written);
  EXPECT_EQ(instants(read(*b, key)), (std::vector<Instant>{minute(3), minute(2), minute(1)}));
  EXPECT_EQ(instants(read(*b, key, 2)), (std::vector<Instant>{minute(3), minute(2)}));
  EXPECT_TRUE(read(*b, job("other")).empty());
}

TEST_P(FleetStateContract, AFiresEntryIsItsHighestRankedRecordWhoeverWritesFirst) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("rank");
  // Another replica's skip of the fire, then the run: the run replaces it.
  ASSERT_EQ(write(*a, record(key, 1, FireFate::skipped, "replica-a")), LedgerWriteResult::Status::written);
  ASSERT_EQ(write(*b, record(key, 1, FireFate::running, "replica-b")), LedgerWriteResult::Status::written);
  // A skip that arrives late, and the same running record again, do not.
  EXPECT_EQ(write(*a, record(key, 1, FireFate::skipped, "replica-a")), LedgerWriteResult::Status::outranked);
  EXPECT_EQ(write(*b, record(key, 1, FireFate::running, "replica-b")), LedgerWriteResult::Status::outranked);
  FireRecord finished = record(key, 1, FireFate::failed, "replica-b");
  finished.error = "exit status 3";
  ASSERT_EQ(write(*b, finished), LedgerWriteResult::Status::written);
  // A surviving replica that declares it lost after it finished is outranked.
  EXPECT_EQ(write(*a, record(key, 1, FireFate::lost, "replica-a")), LedgerWriteResult::Status::outranked);
  const auto kept = read(*a, key);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.front().fate, FireFate::failed);
  EXPECT_EQ(kept.front().replica_id, "replica-b");
  EXPECT_EQ(kept.front().error, "exit status 3");
}

// A follower's not-leader ranks below every other fate: written first, it
// gives way to the leader's skip; a second follower's does not replace it.
TEST_P(FleetStateContract, AFollowersNotLeaderGivesWayToTheLeadersSkip) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("follower");
  FireRecord follower = record(key, 1, FireFate::skipped, "replica-a");
  follower.reason = "not-leader";
  ASSERT_EQ(ledger_rank(follower), 0);
  ASSERT_EQ(write(*a, follower), LedgerWriteResult::Status::written);
  follower.replica_id = "replica-c";
  EXPECT_EQ(write(*a, follower), LedgerWriteResult::Status::outranked);
  FireRecord leader = record(key, 1, FireFate::skipped, "replica-b");
  leader.reason = "overlap";
  ASSERT_EQ(write(*b, leader), LedgerWriteResult::Status::written);
  follower.replica_id = "replica-a";
  EXPECT_EQ(write(*a, follower), LedgerWriteResult::Status::outranked);
  const auto kept = read(*a, key);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.front().reason, "overlap");
  EXPECT_EQ(kept.front().replica_id, "replica-b");
}

TEST_P(FleetStateContract, RacingWritersOfOneFireLeaveTheHighestRank) {
  auto fleet = GetParam().make();
  const std::string key = job("race");
  const std::vector<FireFate> fates{FireFate::skipped, FireFate::cancelled, FireFate::running, FireFate::lost,
                                    FireFate::succeeded, FireFate::skipped, FireFate::running, FireFate::missed};
  std::vector<std::shared_ptr<FleetState>> replicas;
  for (std::size_t i = 0; i < fates.size(); ++i) replicas.push_back(fleet->replica());
  std::barrier start(static_cast<std::ptrdiff_t>(fates.size()));
  std::atomic<int> succeeded_written{0};
  std::vector<std::jthread> threads;
  for (std::size_t i = 0; i < fates.size(); ++i) {
    threads.emplace_back([&, i] {
      const FireRecord r = record(key, 1, fates[i], ("replica-" + std::to_string(i)).c_str());
      start.arrive_and_wait();
      if (write(*replicas[i], r) == LedgerWriteResult::Status::written && fates[i] == FireFate::succeeded) {
        ++succeeded_written;
      }
    });
  }
  threads.clear();
  EXPECT_EQ(succeeded_written.load(), 1);  // the top rank is never outranked
  const auto kept = read(*replicas[0], key);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.front().fate, FireFate::succeeded);
  EXPECT_EQ(kept.front().replica_id, "replica-4");
}

// Replicas write their batches at once, each over the same jobs and fires
// in its own order (as their ledger writers do after an outage, or at a
// fleet's stop): every batch is written, none fails on another's locks
// (PostgreSQL answered "deadlock detected" to batches that took the same
// jobs' rows in opposite orders).
TEST_P(FleetStateContract, BatchesOverTheSameJobsInAnyOrderAreAllWritten) {
  auto fleet = GetParam().make();
  constexpr int writers = 3, rounds = 12, jobs = 6, fires = 4;
  std::vector<std::shared_ptr<FleetState>> replicas;
  for (int i = 0; i < writers; ++i) replicas.push_back(fleet->replica());
  std::vector<std::string> keys;
  for (int j = 0; j < jobs; ++j) keys.push_back(job(("concurrent-" + std::to_string(j)).c_str()));
  std::barrier start(writers);
  std::atomic<int> errors{0};
  std::vector<std::jthread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < rounds; ++round) {
        std::vector<LedgerWrite> writes;
        for (int j = 0; j < jobs; ++j) {
          // Writer 0 goes up, writer 1 down, writer 2 from the middle.
          const int job_index = w == 0 ? j : w == 1 ? jobs - 1 - j : (j + jobs / 2) % jobs;
          const std::string& key = keys[static_cast<std::size_t>(job_index)];
          for (int f = 0; f < fires; ++f) {
            const int at = round * fires + (w == 1 ? fires - 1 - f : f);
            writes.push_back({record(key, at, w == 0 ? FireFate::skipped : FireFate::succeeded,
                                     ("replica-" + std::to_string(w)).c_str()),
                              {}});
          }
        }
        start.arrive_and_wait();
        for (const auto& result : replicas[static_cast<std::size_t>(w)]->record_fires(writes)) {
          if (result.status == LedgerWriteResult::Status::error) {
            ++errors;
            ADD_FAILURE() << "writer " << w << ", round " << round << ": " << result.error;
            break;
          }
        }
      }
    });
  }
  threads.clear();
  EXPECT_EQ(errors.load(), 0);
  const auto kept = read(*replicas[0], keys.front());
  ASSERT_EQ(kept.size(), static_cast<std::size_t>(rounds * fires));
  EXPECT_EQ(kept.front().fate, FireFate::succeeded);
}

TEST_P(FleetStateContract, ALedgerKeepsItsNewestKeepCountAndNothingOlderThanKeepFor) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string key = job("retention");
  const LedgerRetention three{3, std::chrono::hours{24}};
  for (int at = 1; at <= 5; ++at) ASSERT_EQ(write(*a, record(key, at, FireFate::succeeded), three), LedgerWriteResult::Status::written);
  EXPECT_EQ(instants(read(*a, key)), (std::vector<Instant>{minute(5), minute(4), minute(3)}));
  // keep_for counts back from the newest record: at minute 65, 3 and 4
  // are more than an hour older than it, 5 is not.
  const LedgerRetention hour{100, std::chrono::hours{1}};
  ASSERT_EQ(write(*a, record(key, 65, FireFate::succeeded), hour), LedgerWriteResult::Status::written);
  EXPECT_EQ(instants(read(*a, key)), (std::vector<Instant>{minute(65), minute(5)}));
  // An old record written late goes at once if it is past keep_for
  // (answered let_go, or written by a store that does not tell).
  const auto late = write(*a, record(key, 2, FireFate::skipped), hour);
  EXPECT_TRUE(late == LedgerWriteResult::Status::let_go || late == LedgerWriteResult::Status::written);
  EXPECT_EQ(instants(read(*a, key)), (std::vector<Instant>{minute(65), minute(5)}));
}

// One clock: a record dated ahead (a replica whose clock is a year off)
// trims nothing the store's clock would keep; keep_for then counts back
// from the store's clock, not from that record.
TEST_P(FleetStateContract, ARecordDatedAheadOfTheStoresClockDeletesNoOtherRecord) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string key = job("dated-ahead");
  const LedgerRetention three_days{100, std::chrono::hours{72}};
  for (int at = 1; at <= 3; ++at) {
    ASSERT_EQ(write(*a, record(key, at, FireFate::succeeded), three_days), LedgerWriteResult::Status::written);
  }
  FireRecord ahead = record(key, 0, FireFate::skipped);
  ahead.fire_key = key + "@a-year-ahead";
  ahead.scheduled_at = real_now() + std::chrono::hours{24 * 365};
  ASSERT_EQ(write(*a, ahead, three_days), LedgerWriteResult::Status::written);
  EXPECT_EQ(instants(read(*a, key)),
            (std::vector<Instant>{cursor_instant(ahead.scheduled_at), minute(3), minute(2), minute(1)}))
      << "the records of two days ago are within keep_for of the store's clock";
}

TEST_P(FleetStateContract, ABatchAnswersEachWriteInOrderAcrossJobs) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string one = job("batch-one"), two = job("batch-two");
  const std::vector<LedgerWrite> writes{{record(one, 1, FireFate::running), {}},
                                        {record(two, 1, FireFate::skipped), {}},
                                        {record(one, 1, FireFate::succeeded), {}},
                                        {record(two, 1, FireFate::skipped), {}},
                                        {record(one, 2, FireFate::running), {}}};
  const auto results = a->record_fires(writes);
  ASSERT_EQ(results.size(), writes.size());
  const std::vector<LedgerWriteResult::Status> expected{
      LedgerWriteResult::Status::written, LedgerWriteResult::Status::written, LedgerWriteResult::Status::written,
      LedgerWriteResult::Status::outranked, LedgerWriteResult::Status::written};
  for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].status, expected[i]) << i << results[i].error;
  const auto kept = read(*a, one);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].fate, FireFate::running);
  EXPECT_EQ(kept[1].fate, FireFate::succeeded);
  EXPECT_EQ(read(*a, two).size(), 1u);
}

TEST_P(FleetStateContract, EveryLedgerFieldRoundTripsWithAnyBytes) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("fields") + " with spaces, 100% {braces} and ünïcode";
  FireRecord r = record(key, 7, FireFate::timed_out, "replica-x");
  r.scheduled_at += 123456789ns;  // kept to the microsecond
  r.manual = true;
  r.fence = std::numeric_limits<std::uint64_t>::max();
  r.attempts = 1000;
  r.started_at = minute(7) + 2s;
  r.finished_at = minute(8);
  r.duration = 58s;
  r.exit_status = -1;
  r.signal = 9;
  r.reason = "-";
  r.error = "line one\nline two\r\ttab % %41 -";
  for (int i = 0; i < static_cast<int>(max_output_tail_bytes); ++i) r.output_tail.push_back(static_cast<char>(i % 256));
  r.missed_count = 0;
  ASSERT_EQ(write(*a, r), LedgerWriteResult::Status::written);
  const auto kept = read(*b, key);
  ASSERT_EQ(kept.size(), 1u);
  FireRecord expected = r;
  expected.scheduled_at = std::chrono::floor<std::chrono::microseconds>(r.scheduled_at);
  EXPECT_EQ(kept.front(), expected);
  FireRecord missed = record(key, 9, FireFate::missed);
  missed.reason = "run-once";
  missed.missed_count = 1234;
  missed.last_missed = minute(20);
  ASSERT_EQ(write(*a, missed), LedgerWriteResult::Status::written);
  EXPECT_EQ(read(*b, key, 1).front(), missed);
}

// A ledger lives keep_for after its last write, and at most
// ledger_life_beyond() longer.
TEST_P(FleetStateContract, ALedgerExpiresKeepForAfterItsLastWrite) {
  auto fleet = GetParam().make();
  auto a = fleet->replica_for_expiry();
  const std::string key = job("expiry");
  const LedgerRetention retention{100, fleet->short_keep_for()};
  ASSERT_EQ(write(*a, record(key, 1, FireFate::succeeded), retention), LedgerWriteResult::Status::written);
  fleet->let_pass(retention.keep_for / 2);
  FireRecord second = record(key, 1, FireFate::succeeded);  // within keep_for of the first
  second.fire_key += ".5";
  second.scheduled_at += 1ms;
  ASSERT_EQ(write(*a, second, retention), LedgerWriteResult::Status::written);
  fleet->let_pass(retention.keep_for * 3 / 4);
  EXPECT_EQ(read(*a, key).size(), 2u);  // 5/4 after the first write, 3/4 after the last
  fleet->let_pass(retention.keep_for / 2 + fleet->ledger_life_beyond(retention.keep_for) + 1ms);
  EXPECT_TRUE(read(*a, key).empty());
}

TEST_P(FleetStateContract, BadLedgerArgumentsAreRefusedTheSameWayEverywhere) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  const std::string key = job("args");
  const auto refused = [&](FireRecord r, LedgerRetention retention, std::string_view needle) {
    const LedgerWrite one{std::move(r), retention};
    try {
      (void)a->record_fires(std::span(&one, 1));
      ADD_FAILURE() << "accepted; expected an error with \"" << needle << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const FireRecord good = record(key, 1, FireFate::succeeded);
  FireRecord r = good;
  r.fire_key = "elsewhere@1";
  refused(r, {}, "does not start with");
  r = good;
  r.replica_id = "two words";
  refused(r, {}, "replica id");
  r = good;
  r.output_tail.assign(max_output_tail_bytes + 1, 'x');
  refused(r, {}, "output_tail is 4097 bytes");
  refused(good, {0, std::chrono::hours{1}}, "keep_count 0");
  refused(good, {LedgerRetention::max_keep_count + 1, std::chrono::hours{1}}, "keep_count 10001");
  refused(good, {1, 0ms}, "keep_for 0");
  EXPECT_THROW((void)a->read_fires(key, 0), std::invalid_argument);
  EXPECT_THROW((void)a->read_fires(" ", 1), std::invalid_argument);
  EXPECT_TRUE(read(*a, key).empty());  // nothing of a refused batch was written
  // cut_fire_record() makes any record fit.
  r = good;
  r.output_tail.assign(3 * max_output_tail_bytes, 'o');
  r.output_tail += "the end";
  r.error.assign(5000, 'e');
  const FireRecord cut = cut_fire_record(r);
  EXPECT_EQ(cut.output_tail.size(), max_output_tail_bytes);
  EXPECT_TRUE(cut.output_tail.ends_with("the end"));
  EXPECT_EQ(cut.error.size(), max_fire_error_bytes);
  EXPECT_EQ(write(*a, cut), LedgerWriteResult::Status::written);
}

}  // namespace fleetcron::test
