// Catch-up across restarts (docs/fleet-state.md): a fleet whose replicas
// all stopped runs the instants it missed once across the fleet, per the
// missed-fire policy, however long it was down. Memory stores on a virtual
// clock; the same runs on Redis are in tests/e2e/.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "scheduler/harness.h"
#include "support/forwarding_fleet_state.h"

namespace fleetcron::test {
namespace {

// A fleet of schedulers sharing one claimer (or lease) and one fleet state,
// each with one job; records which instants ran where.
class Fleet {
 public:
  enum class Mode { claim, leader, both, none };

  explicit Fleet(Mode mode = Mode::claim) : mode_(mode) {}

  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(at("2026-01-02T02:59:00Z"));  // a Friday
  std::shared_ptr<MemoryClaimer> claimer = std::make_shared<MemoryClaimer>(clock, 10min);
  std::shared_ptr<MemoryLease> lease = std::make_shared<MemoryLease>(clock, 30s);
  std::shared_ptr<FleetState> state = std::make_shared<MemoryFleetState>(clock);
  std::shared_ptr<EventLog> log = std::make_shared<EventLog>();
  bool within_window_only = false;
  std::chrono::milliseconds job_takes{0};

  /// Starts `replicas` schedulers, each with `spec` as job "job".
  void start(int replicas, std::string_view spec, EntryOptions entry = {}) {
    entry.key = "job";
    for (int i = 0; i < replicas; ++i) {
      SchedulerOptions options;
      options.clock = clock;
      options.recorder = log;
      options.fleet.state = state;
      options.fleet.replica_id = "r" + std::to_string(generation_) + "-" + std::to_string(i);
      options.limits.max_concurrent = 2;
      options.logger = [](LogLevel, std::string_view) {};
      options.fleet.catch_up_beyond_dedup_window = !within_window_only;
      if (mode_ == Mode::claim || mode_ == Mode::both) options.claimer = claimer;
      if (mode_ == Mode::leader || mode_ == Mode::both) options.elector = lease->make_elector();
      replicas_.push_back(std::make_unique<Scheduler>(options));
      replicas_.back()->add(spec, [this](const FireContext& c, std::stop_token) {
        {
          std::lock_guard guard(mutex_);
          ++runs_[c.scheduled_at];
          max_active_ = std::max(max_active_, ++active_);
        }
        if (job_takes > 0ms) std::this_thread::sleep_for(job_takes);  // the job's own length, not a wait for it
        std::lock_guard guard(mutex_);
        --active_;
      }, entry);
    }
    ++generation_;
    for (auto& replica : replicas_) replica->start();
    settle();
  }

  /// Waits until every replica's loop, watchdog, catch-up and controls
  /// threads wait on the clock again: every catch-up has been decided.
  void settle() {
    const std::size_t waiters = 4 * replicas_.size();
    ASSERT_TRUE(Harness::eventually([&] { return clock->due_waiter_count() == 0 && clock->waiter_count() >= waiters; }))
        << "waiters " << clock->waiter_count();
  }

  void advance_to(Instant instant) { clock->advance(instant - clock->now()); }

  /// Lets every queued and running fire finish, then stops.
  void stop_all() {
    for (auto& replica : replicas_) EXPECT_TRUE(replica->drain(clock->steady_now() + 10s));
    replicas_.clear();
  }

  std::map<Instant, int> runs() {
    std::lock_guard guard(mutex_);
    return runs_;
  }

  int max_active() {
    std::lock_guard guard(mutex_);
    return max_active_;
  }

  std::vector<MissedFireEvent> catch_ups() {
    std::vector<MissedFireEvent> out;
    for (const auto& event : log->all<MissedFireEvent>()) {
      if (event.catch_up) out.push_back(event);
    }
    return out;
  }

  /// Runs the daily job once (Friday 03:00), then stops the whole fleet.
  void run_friday_then_stop(std::string_view spec, EntryOptions entry = {}) {
    start(1, spec, entry);
    clock->advance(1min);
    ASSERT_TRUE(log->wait_count<JobCompletedEvent>(1));
    stop_all();
  }

 private:
  Mode mode_;
  int generation_ = 0;
  std::vector<std::unique_ptr<Scheduler>> replicas_;
  std::mutex mutex_;
  std::map<Instant, int> runs_;
  int active_ = 0;
  int max_active_ = 0;
};

constexpr std::string_view daily = "0 3 * * *";

TEST(CatchUp, AWeekendOutageRunsTheDailyJobOnceAcrossTheFleet) {
  Fleet fleet;
  fleet.run_friday_then_stop(daily);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));  // Monday: Sat, Sun and Mon 03:00 were missed
  fleet.start(3, daily);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(2));
  fleet.stop_all();
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1}, {at("2026-01-05T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  ASSERT_EQ(fleet.catch_ups().size(), 1U);  // one replica won; the others saw the cursor past
  const MissedFireEvent event = fleet.catch_ups().front();
  EXPECT_EQ(event.missed, 3U);
  EXPECT_EQ(event.runs, 1U);
  EXPECT_EQ(event.last_missed, at("2026-01-05T03:00:00Z"));
  EXPECT_EQ(fleet.log->count<CancelledFireEvent>(), 0U);
  for (const auto& skipped : fleet.log->all<SkippedFireEvent>()) {
    ADD_FAILURE() << "skipped " << skipped.fire_key << ": " << skipped.error;
  }
}

TEST(CatchUp, RunAllRunsEachMissedInstantOnceAndFarBeyondTheClaimTtl) {
  Fleet fleet;
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  fleet.run_friday_then_stop(daily, entry);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(3, daily, entry);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(4));
  fleet.stop_all();
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1},
                                        {at("2026-01-03T03:00:00Z"), 1},
                                        {at("2026-01-04T03:00:00Z"), 1},
                                        {at("2026-01-05T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  EXPECT_EQ(fleet.log->count<SkippedFireEvent>(), 0U);  // none refused as stale, though days old
  EXPECT_EQ(fleet.log->count<CancelledFireEvent>(), 0U);
}

TEST(CatchUp, AnEntryThatLimitsOverlapRunsItsCaughtUpInstantsOneAfterAnother) {
  Fleet fleet;
  fleet.job_takes = 20ms;
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all, .overlap = OverlapPolicy::skip};
  fleet.run_friday_then_stop(daily, entry);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(2, daily, entry);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(4));
  fleet.stop_all();
  EXPECT_EQ(fleet.runs().size(), 4U);  // each of Sat, Sun, Mon: none skipped as overlapping the one before
  EXPECT_EQ(fleet.max_active(), 1);
  EXPECT_EQ(fleet.log->count<SkippedFireEvent>(), 0U);
}

TEST(CatchUp, SkipRunsNothingButReportsTheMissedInstantsOnce) {
  Fleet fleet;
  const EntryOptions entry{.missed_fire = MissedFirePolicy::skip};
  fleet.run_friday_then_stop(daily, entry);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(3, daily, entry);
  fleet.stop_all();
  EXPECT_EQ(fleet.runs().size(), 1U);
  ASSERT_EQ(fleet.catch_ups().size(), 1U);
  EXPECT_EQ(fleet.catch_ups().front().missed, 3U);
  EXPECT_EQ(fleet.catch_ups().front().runs, 0U);
}

TEST(CatchUp, ReachesBackOnlyAsFarAsTheEntrySays) {
  Fleet fleet;
  EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  entry.catch_up_reach = std::chrono::hours{24 * 2};
  fleet.run_friday_then_stop(daily, entry);
  fleet.advance_to(at("2026-01-12T09:00:00Z"));  // ten days later
  fleet.start(2, daily, entry);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(3));
  fleet.stop_all();
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1},
                                        {at("2026-01-11T03:00:00Z"), 1},
                                        {at("2026-01-12T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
}

TEST(CatchUp, AJobNewToTheStoreOrWithAnotherScheduleCatchesUpNothing) {
  Fleet fleet;
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(2, daily);  // no cursor yet
  fleet.stop_all();
  EXPECT_TRUE(fleet.runs().empty());
  EXPECT_TRUE(fleet.catch_ups().empty());

  Fleet edited;
  edited.run_friday_then_stop(daily);
  edited.advance_to(at("2026-01-05T09:00:00Z"));
  edited.start(2, "0 4 * * *");  // the schedule changed while the fleet was down
  edited.stop_all();
  EXPECT_EQ(edited.runs().size(), 1U);
  EXPECT_TRUE(edited.catch_ups().empty());
}

TEST(CatchUp, OnlyTheLeaderCatchesUpInLeaderMode) {
  Fleet fleet(Fleet::Mode::leader);
  fleet.run_friday_then_stop(daily);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(3, daily);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(2));
  fleet.stop_all();
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1}, {at("2026-01-05T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  EXPECT_EQ(fleet.catch_ups().size(), 1U);
}

// A minutely job ran (03:00); the fleet restarts while a dead leader's
// lease still runs (to 03:02:30): 03:01 and 03:02 are skipped not-leader by
// every replica, and run once by the one that leads next (run-all), before
// its own 03:03.
void leaderless_start_is_caught_up(Fleet::Mode mode, int replicas) {
  Fleet fleet(mode);
  fleet.lease = std::make_shared<MemoryLease>(fleet.clock, 150s);
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  constexpr std::string_view minutely = "* * * * *";
  fleet.run_friday_then_stop(minutely, entry);
  const std::shared_ptr<Elector> dead_leader = fleet.lease->make_elector();
  (void)dead_leader->is_leader();  // at 03:00: held (by it or the stopped replica) until 03:02:30
  fleet.start(replicas, minutely, entry);
  const auto skipped = static_cast<std::size_t>(replicas);
  fleet.advance_to(at("2026-01-02T03:01:00Z"));
  ASSERT_TRUE(fleet.log->wait_count<SkippedFireEvent>(skipped));
  fleet.advance_to(at("2026-01-02T03:02:00Z"));
  ASSERT_TRUE(fleet.log->wait_count<SkippedFireEvent>(2 * skipped));
  fleet.advance_to(at("2026-01-02T03:03:00Z"));
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(4));
  fleet.stop_all();
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1},
                                        {at("2026-01-02T03:01:00Z"), 1},
                                        {at("2026-01-02T03:02:00Z"), 1},
                                        {at("2026-01-02T03:03:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  ASSERT_EQ(fleet.catch_ups().size(), 1U);
  EXPECT_EQ(fleet.catch_ups()[0].first_missed, at("2026-01-02T03:01:00Z"));
  EXPECT_EQ(fleet.catch_ups()[0].runs, 2U);
  // The followers' own skips of 03:01 and 03:02, and of 03:03 (not-leader,
  // or its claim taken in both mode): nothing else.
  for (const auto& skip : fleet.log->all<SkippedFireEvent>()) {
    EXPECT_TRUE(skip.reason == SkipReason::not_leader || skip.reason == SkipReason::already_claimed)
        << to_string(skip.reason) << " " << format_rfc3339(skip.scheduled_at);
  }
}

TEST(CatchUp, FiresSkippedWhileNoReplicaLedAreCaughtUpByTheNextLeader) {
  leaderless_start_is_caught_up(Fleet::Mode::leader, 1);
}

TEST(CatchUp, FiresSkippedWhileNoReplicaLedAreCaughtUpOnceInBothMode) {
  leaderless_start_is_caught_up(Fleet::Mode::both, 3);
}

TEST(CatchUp, FiresThatRanAreNeverCaughtUpAgain) {
  // A minutely job runs on a fleet, which stops and comes back: only the
  // instants while it was down are caught up, never one that ran.
  Fleet fleet;
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  fleet.start(3, "* * * * *", entry);
  for (int i = 0; i < 5; ++i) {
    fleet.clock->advance(1min);
    ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(static_cast<std::size_t>(i + 1)));
  }
  fleet.settle();
  fleet.stop_all();
  fleet.clock->advance(30min);  // 30 instants missed, well past the claim TTL
  fleet.start(3, "* * * * *", entry);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(35));
  fleet.stop_all();
  const auto runs = fleet.runs();
  EXPECT_EQ(runs.size(), 35U);
  for (const auto& [instant, count] : runs) EXPECT_EQ(count, 1) << format_rfc3339(instant);
}

// A fleet state that fails while `failing` is set.
class FlakyFleetState final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  std::atomic<bool> failing{true};

  CursorRead read_cursor(std::string_view job) override {
    if (failing) return {CursorRead::Status::error, std::nullopt, "store down"};
    return inner_->read_cursor(job);
  }
  CursorAdvance advance_cursor(std::string_view job, Instant at, std::uint64_t digest, std::chrono::nanoseconds keep) override {
    if (failing) return {CursorAdvance::Status::error, std::nullopt, "store down"};
    return inner_->advance_cursor(job, at, digest, keep);
  }
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant at, std::uint64_t digest,
                              std::chrono::nanoseconds keep, std::string_view claimant) override {
    if (failing) return {CatchUpClaim::Status::error, std::nullopt, "store down"};
    return inner_->claim_catch_up(job, seen, at, digest, keep, claimant);
  }
};

// A fleet state whose reads wait until `readers` callers read, so their
// compare-and-sets race from the same cursor.
class BarrierFleetState final : public ForwardingFleetState {
 public:
  BarrierFleetState(std::shared_ptr<FleetState> inner, int readers)
      : ForwardingFleetState(std::move(inner)), readers_(readers) {}

  CursorRead read_cursor(std::string_view job) override {
    CursorRead read = inner_->read_cursor(job);
    std::unique_lock lock(mutex_);
    if (--readers_ <= 0) cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return readers_ <= 0; });
    return read;
  }
  /// Whether every reader arrived (else the race the test wants did not happen).
  bool all_arrived() {
    std::lock_guard guard(mutex_);
    return readers_ <= 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int readers_;
};

// A store that restarted since the cursor was written (rule 4): its
// compare-and-set still takes the cursor, but answers epoch_changed.
class RestartedFleetState final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant at, std::uint64_t digest,
                              std::chrono::nanoseconds keep, std::string_view claimant) override {
    CatchUpClaim answer = inner_->claim_catch_up(job, seen, at, digest, keep, claimant);
    if (answer.status == CatchUpClaim::Status::claimed) answer.status = CatchUpClaim::Status::epoch_changed;
    return answer;
  }
};

TEST(CatchUp, ACursorFromAnEarlierStoreEpochIsReportedNotRun) {
  Fleet fleet;
  fleet.run_friday_then_stop(daily);
  fleet.state = std::make_shared<RestartedFleetState>(fleet.state);
  fleet.advance_to(at("2026-01-05T09:00:00Z"));  // the store restarted during the weekend
  fleet.start(3, daily);
  // One replica took the cursor and reported the range; nothing ran.
  ASSERT_EQ(fleet.catch_ups().size(), 1U);
  const MissedFireEvent event = fleet.catch_ups().front();
  EXPECT_EQ(event.missed, 3U);
  EXPECT_EQ(event.runs, 0U);
  EXPECT_EQ(event.withheld.rfind("catch-up-unknown: the cursor (2026-01-02T03:00:00Z) predates the store's last", 0), 0U)
      << event.withheld;
  const std::map<Instant, int> friday_only{{at("2026-01-02T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), friday_only);
  // The ledger keeps the report; the cursor starts again from its end.
  ASSERT_TRUE(Harness::eventually([&] {
    const LedgerRead read = fleet.state->read_fires("job", 10);
    return std::any_of(read.records.begin(), read.records.end(), [](const FireRecord& r) {
      // The whole reason, not cut to the ledger's 256 bytes.
      return r.fate == FireFate::missed && r.reason.find("0 of 3 queued (catch-up); catch-up-unknown") != std::string::npos &&
             r.reason.ends_with("before fires that ran");
    });
  }));
  EXPECT_EQ(fleet.state->read_cursor("job").cursor->instant, at("2026-01-05T03:00:00Z"));
  fleet.advance_to(at("2026-01-06T03:00:30Z"));  // Tuesday's fire runs as ever
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(2));
  fleet.stop_all();
  EXPECT_EQ(fleet.runs().size(), 2U);
}

// A store whose catch-up answer is lost after it applied it, in epoch
// "e2" if `restarted` (the cursor was read in "e1").
class LostAnswerFleetState final : public ForwardingFleetState {
 public:
  LostAnswerFleetState(std::shared_ptr<FleetState> inner, bool restarted)
      : ForwardingFleetState(std::move(inner)), restarted_(restarted) {}
  CursorRead read_cursor(std::string_view job) override {
    CursorRead read = inner_->read_cursor(job);
    if (read.cursor) read.cursor->epoch = applied_ && restarted_ ? "e2" : "e1";
    return read;
  }
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant at, std::uint64_t digest,
                              std::chrono::nanoseconds keep, std::string_view claimant) override {
    std::optional<JobCursor> stored = seen;
    if (stored) stored->epoch.clear();  // as the inner store keeps it
    CatchUpClaim answer = inner_->claim_catch_up(job, stored, at, digest, keep, claimant);
    if (answer.status != CatchUpClaim::Status::claimed) return answer;
    applied_ = true;
    return {CatchUpClaim::Status::error, std::nullopt, "connection lost before the answer"};
  }

 private:
  bool restarted_;
  std::atomic<bool> applied_{false};
};

TEST(CatchUp, AWinWhoseAnswerWasLostIsRecognisedInItsEpoch) {
  for (const bool restarted : {false, true}) {
    SCOPED_TRACE(restarted ? "restarted" : "same epoch");
    Fleet fleet;
    fleet.run_friday_then_stop(daily);
    fleet.state = std::make_shared<LostAnswerFleetState>(fleet.state, restarted);
    fleet.advance_to(at("2026-01-05T09:00:00Z"));
    fleet.start(1, daily);
    ASSERT_EQ(fleet.catch_ups().size(), 1U);
    const MissedFireEvent event = fleet.catch_ups().front();
    if (restarted) {
      EXPECT_EQ(event.runs, 0U);
      EXPECT_EQ(event.withheld.rfind("catch-up-unknown: ", 0), 0U) << event.withheld;
    } else {
      EXPECT_EQ(event.runs, 1U);  // run-once: Monday 03:00
      ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(2));
    }
    fleet.stop_all();
    EXPECT_EQ(fleet.runs().size(), restarted ? 1U : 2U);
  }
}

TEST(CatchUp, RacingCatchUpsFromOneCursorHaveOneWinnerWithoutAnyClaimer) {
  // No claimer and no elector: the compare-and-set alone keeps it once.
  Fleet fleet(Fleet::Mode::none);
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  fleet.run_friday_then_stop(daily, entry);
  auto barrier = std::make_shared<BarrierFleetState>(fleet.state, 3);
  fleet.state = barrier;
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(3, daily, entry);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(4));
  fleet.stop_all();
  EXPECT_TRUE(barrier->all_arrived());
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1},
                                        {at("2026-01-03T03:00:00Z"), 1},
                                        {at("2026-01-04T03:00:00Z"), 1},
                                        {at("2026-01-05T03:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  EXPECT_EQ(fleet.catch_ups().size(), 1U);
}

TEST(CatchUp, AStoreDownAtStartFailsClosedAndTheCatchUpIsRetried) {
  constexpr std::string_view hourly = "0 * * * *";
  Fleet fleet;
  fleet.run_friday_then_stop(hourly);
  auto flaky = std::make_shared<FlakyFleetState>(fleet.state);
  fleet.state = flaky;
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(2, hourly);
  fleet.clock->advance(1h);  // 10:00 is due while the catch-up is pending: skipped, not run
  ASSERT_TRUE(fleet.log->wait_count<SkippedFireEvent>(2));
  EXPECT_EQ(fleet.runs().size(), 1U);
  for (const auto& skipped : fleet.log->all<SkippedFireEvent>()) {
    EXPECT_EQ(skipped.reason, SkipReason::claim_error);
    EXPECT_NE(skipped.error.find("catch-up"), std::string::npos) << skipped.error;
  }
  flaky->failing = false;
  fleet.clock->advance(30s);  // past the retry backoff
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(2));
  fleet.settle();
  fleet.stop_all();
  // Monday 09:00 (run-once), once; 10:00 was skipped without moving the cursor.
  const std::map<Instant, int> expected{{at("2026-01-02T03:00:00Z"), 1}, {at("2026-01-05T09:00:00Z"), 1}};
  EXPECT_EQ(fleet.runs(), expected);
  EXPECT_EQ(fleet.catch_ups().size(), 1U);
}

TEST(CatchUp, ARemovedJobReturningLaterCatchesUpNothing) {
  Fleet fleet;
  fleet.run_friday_then_stop(daily);
  SchedulerOptions options;
  options.clock = fleet.clock;
  options.fleet.state = fleet.state;
  Scheduler scheduler(options);
  const EntryId id = scheduler.add(daily, [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "job"});
  fleet.advance_to(at("2026-01-03T12:00:00Z"));
  scheduler.remove(id);  // the removal leaves a tombstone at its instant
  const CursorRead read = fleet.state->read_cursor("job");
  ASSERT_EQ(read.status, CursorRead::Status::found);
  EXPECT_EQ(read.cursor->instant, at("2026-01-03T12:00:00Z"));
  fleet.advance_to(at("2026-01-05T09:00:00Z"));
  fleet.start(2, daily);
  fleet.stop_all();
  EXPECT_EQ(fleet.runs().size(), 1U);  // Friday's only: not Saturday's, Sunday's or Monday's
  EXPECT_TRUE(fleet.catch_ups().empty());
}

TEST(CatchUp, WithinTheDedupWindowOnlyWhenTheFleetMayHaveGoReplicas) {
  // A fleet that declares nothing beyond its claims catches up only what
  // claims still guard: the weekend is not replayed, the last minutes are.
  Fleet fleet;
  fleet.within_window_only = true;
  const EntryOptions entry{.missed_fire = MissedFirePolicy::run_all};
  fleet.start(2, "*/2 * * * *", entry);
  fleet.clock->advance(1min);
  ASSERT_TRUE(fleet.log->wait_count<JobCompletedEvent>(1));  // 03:00
  fleet.settle();
  fleet.stop_all();
  fleet.clock->advance(13min);  // 03:13: 03:02 .. 03:12 missed; the claims guard the last 10 min
  fleet.start(2, "*/2 * * * *", entry);
  fleet.stop_all();
  std::set<Instant> ran;
  for (const auto& [instant, count] : fleet.runs()) {
    EXPECT_EQ(count, 1);
    ran.insert(instant);
  }
  EXPECT_TRUE(ran.contains(at("2026-01-02T03:12:00Z")));
  EXPECT_TRUE(ran.contains(at("2026-01-02T03:04:00Z")));
  EXPECT_FALSE(ran.contains(at("2026-01-02T03:02:00Z")));  // older than the window: not run on the cursor's word
  ASSERT_EQ(fleet.catch_ups().size(), 1U);
  EXPECT_EQ(fleet.catch_ups().front().missed, 6U);  // reported: 03:02 .. 03:12
  EXPECT_EQ(fleet.catch_ups().front().runs, 5U);    // run: 03:04 .. 03:12
  for (const auto& skipped : fleet.log->all<SkippedFireEvent>()) {
    if (skipped.reason != SkipReason::already_claimed) ADD_FAILURE() << skipped.fire_key << ": " << skipped.error;
  }
}

// A fleet state whose advance takes `delay` of the virtual clock.
class SlowAdvanceFleetState final : public ForwardingFleetState {
 public:
  SlowAdvanceFleetState(std::shared_ptr<FleetState> inner, std::shared_ptr<VirtualClock> clock)
      : ForwardingFleetState(std::move(inner)), clock_(std::move(clock)) {}
  std::atomic<bool> slow{false};

  CursorAdvance advance_cursor(std::string_view job, Instant at, std::uint64_t digest, std::chrono::nanoseconds keep) override {
    if (slow.exchange(false)) clock_->advance(11min);  // a pause between the claim and the advance
    return inner_->advance_cursor(job, at, digest, keep);
  }

 private:
  std::shared_ptr<VirtualClock> clock_;
};

TEST(CatchUp, AFireWhoseCursorAdvancedAfterItsDedupWindowIsNotRun) {
  // Another replica's catch-up may have read the cursor before the late
  // advance and claimed the fire after its first claim expired.
  Fleet fleet;
  auto slow = std::make_shared<SlowAdvanceFleetState>(fleet.state, fleet.clock);
  fleet.state = slow;
  fleet.start(1, "* * * * *");
  slow->slow = true;
  fleet.clock->advance(1min);
  ASSERT_TRUE(fleet.log->wait_count<SkippedFireEvent>(1));
  const SkippedFireEvent skipped = fleet.log->all<SkippedFireEvent>().front();
  EXPECT_EQ(skipped.reason, SkipReason::stale);
  EXPECT_NE(skipped.error.find("cursor advanced too late"), std::string::npos) << skipped.error;
  fleet.stop_all();
  EXPECT_FALSE(fleet.runs().contains(at("2026-01-02T03:00:00Z")));  // later instants run as the loop reaches them
}

// Counts cursor reads, alone and in batches (read_cursors forwarded whole).
class CountingCursorsFleetState final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  std::atomic<int> single_reads{0}, batch_reads{0}, batched_keys{0};
  CursorRead read_cursor(std::string_view job) override {
    ++single_reads;
    return inner_->read_cursor(job);
  }
  std::vector<CursorRead> read_cursors(std::span<const std::string> jobs) override {
    ++batch_reads;
    batched_keys += static_cast<int>(jobs.size());
    return inner_->read_cursors(jobs);
  }
};

// A start queues every job's catch-up: those due together read their
// cursors in one call (Redis: one round trip), and each still runs the
// instant its job missed once.
TEST(CatchUp, CatchUpsDueTogetherReadTheirCursorsInOneCall) {
  const auto clock = std::make_shared<VirtualClock>(at("2026-01-02T02:59:00Z"));
  const auto memory = std::make_shared<MemoryFleetState>(clock);
  const auto claimer = std::make_shared<MemoryClaimer>(clock, 10min);
  constexpr int jobs = 30;
  std::mutex mutex;
  std::map<std::string, int> runs;
  const auto start = [&](std::shared_ptr<FleetState> state, std::shared_ptr<EventLog> log) {
    SchedulerOptions options;
    options.clock = clock;
    options.recorder = std::move(log);
    options.fleet.state = std::move(state);
    options.fleet.replica_id = "r";
    options.claimer = claimer;
    options.logger = [](LogLevel, std::string_view) {};
    auto scheduler = std::make_unique<Scheduler>(options);
    for (int i = 0; i < jobs; ++i) {
      EntryOptions entry;
      entry.key = "job" + std::to_string(i);
      scheduler->add("0 3 * * *", [&, key = entry.key](const FireContext&, std::stop_token) {
        std::lock_guard guard(mutex);
        ++runs[key];
      }, entry);
    }
    scheduler->start();
    return scheduler;
  };
  auto friday_log = std::make_shared<EventLog>();
  auto friday = start(memory, friday_log);
  clock->advance(1min);
  ASSERT_TRUE(friday_log->wait_count<JobCompletedEvent>(jobs));
  EXPECT_TRUE(friday->drain(clock->steady_now() + 10s));
  friday.reset();
  clock->advance(at("2026-01-05T09:00:00Z") - clock->now());  // Monday: three 03:00s missed
  const auto counting = std::make_shared<CountingCursorsFleetState>(memory);
  auto monday_log = std::make_shared<EventLog>();
  auto monday = start(counting, monday_log);
  ASSERT_TRUE(monday_log->wait_count<JobCompletedEvent>(jobs));
  EXPECT_TRUE(monday->drain(clock->steady_now() + 10s));
  EXPECT_EQ(counting->batched_keys.load(), jobs);
  EXPECT_LE(counting->batch_reads.load(), 2) << "the catch-ups queued at the start, read together";
  EXPECT_EQ(counting->single_reads.load(), 0) << "no catch-up read its cursor alone";
  std::lock_guard guard(mutex);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(jobs));
  for (const auto& [key, count] : runs) EXPECT_EQ(count, 2) << key << ": Friday's, and Monday's catch-up once";
}

TEST(CatchUp, OptionsAreValidated) {
  SchedulerOptions options;
  options.fleet.replica_id = "two words";
  EXPECT_THROW(Scheduler{options}, std::invalid_argument);
  options.fleet.replica_id = "ok";
  options.fleet.catch_up_reach = -1s;
  EXPECT_THROW(Scheduler{options}, std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron::test
