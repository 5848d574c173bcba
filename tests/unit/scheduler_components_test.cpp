// The scheduler's components that own their state, each on its own: the
// claim path (elect, screen, claim), the loop's heap of next instants, the
// leader fitness (loop liveness, step-down after failing claims), the
// catch-up queue (retries with a doubling backoff), the fleet controls
// (pauses and triggers, through a host that stands for the scheduler), the
// upkeep thread that polls them and announces the replica, the runs in
// progress (timeouts, stops, lost terms) and the random delays (jitter,
// retry backoff). On a virtual clock.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/scheduler/catch_up_queue.h"
#include "core/scheduler/claim_path.h"
#include "core/scheduler/entry_heap.h"
#include "core/scheduler/fleet_controls.h"
#include "core/scheduler/fleet_upkeep.h"
#include "core/scheduler/registry_membership.h"
#include "core/scheduler/leader_fitness.h"
#include "core/scheduler/random_delays.h"
#include "core/scheduler/runs_in_progress.h"
#include "fleetcron/clock.h"
#include "fleetcron/memory_fleet_state.h"
#include "support/eventually.h"
#include "support/forwarding_fleet_state.h"

namespace fleetcron::detail {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

Instant t0() { return Instant{std::chrono::hours{24 * 365 * 50}}; }

TEST(LeaderFitness, TheLoopIsAliveUntilALookFindsItStillForTheBound) {
  auto clock = std::make_shared<VirtualClock>(t0());
  LeaderFitness fitness(clock);
  EXPECT_TRUE(fitness.loop_alive());  // suspect from this look on
  clock->advance(LeaderFitness::liveness_bound - 1ns);
  EXPECT_TRUE(fitness.loop_alive());
  clock->advance(1ns);
  EXPECT_FALSE(fitness.loop_alive());
  fitness.note_loop_pass();
  EXPECT_TRUE(fitness.loop_alive());
  // A pause: the first look after it finds no pass yet and only suspects.
  clock->advance(1h);
  EXPECT_TRUE(fitness.loop_alive());
}

TEST(LeaderFitness, ClaimsFailingForTheBoundStepTheReplicaDownOnceForTheHold) {
  auto clock = std::make_shared<VirtualClock>(t0());
  LeaderFitness fitness(clock);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);  // the window opens
  clock->advance(4s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(1s);
  EXPECT_EQ(fitness.note_claim(true), std::optional<nanoseconds>(5s));
  EXPECT_TRUE(fitness.stepped_down());
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);  // in flight from before: not counted
  clock->advance(LeaderFitness::step_down_hold - 1ns);
  EXPECT_TRUE(fitness.stepped_down());
  clock->advance(1ns);
  EXPECT_FALSE(fitness.stepped_down());
}

TEST(LeaderFitness, ARealAnswerBetweenFailuresStartsANewWindow) {
  auto clock = std::make_shared<VirtualClock>(t0());
  LeaderFitness fitness(clock);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(3s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(1s);
  EXPECT_EQ(fitness.note_claim(false), std::nullopt);  // a real answer
  clock->advance(1s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);  // 5 s after the first failure: a new window from here
  clock->advance(3s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(2s);
  EXPECT_EQ(fitness.note_claim(true), std::optional<nanoseconds>(5s));
}

TEST(LeaderFitness, AGapLongerThanTheBoundBetweenFailuresStartsANewWindow) {
  auto clock = std::make_shared<VirtualClock>(t0());
  LeaderFitness fitness(clock);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(LeaderFitness::claim_failure_step_down + 1s);  // no failure in between: not continuous
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  EXPECT_FALSE(fitness.stepped_down());
  clock->advance(4s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(1s);
  EXPECT_EQ(fitness.note_claim(true), std::optional<nanoseconds>(5s));
}

TEST(LeaderFitness, AfterTheHoldAFullWindowOfFailuresIsNeededAgain) {
  auto clock = std::make_shared<VirtualClock>(t0());
  LeaderFitness fitness(clock);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  clock->advance(5s);
  ASSERT_EQ(fitness.note_claim(true), std::optional<nanoseconds>(5s));
  clock->advance(LeaderFitness::step_down_hold);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);  // opens the next window
  clock->advance(4s);
  EXPECT_EQ(fitness.note_claim(true), std::nullopt);
  EXPECT_FALSE(fitness.stepped_down());
  clock->advance(1s);
  EXPECT_EQ(fitness.note_claim(true), std::optional<nanoseconds>(5s));
}

/// Records the catch-up attempts; settles at the `settle_at`-th.
class Attempts {
 public:
  explicit Attempts(int settle_at) : settle_at_(settle_at) {}
  bool attempt(nanoseconds backoff) {
    std::lock_guard guard(mutex_);
    backoffs_.push_back(backoff);
    cv_.notify_all();
    return static_cast<int>(backoffs_.size()) >= settle_at_;
  }
  /// Waits (at most a minute, then fails) for the n-th attempt.
  bool wait_for(std::size_t n) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 60s, [&] { return backoffs_.size() >= n; });
  }
  std::vector<nanoseconds> backoffs() {
    std::lock_guard guard(mutex_);
    return backoffs_;
  }

 private:
  const int settle_at_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<nanoseconds> backoffs_;
};

/// Waits (at most a minute) until the queue's thread sleeps towards `deadline`.
[[nodiscard]] bool reaches_deadline(const VirtualClock& clock, Clock::SteadyTime deadline) {
  for (int i = 0; i < 600000 && clock.next_deadline() != deadline; ++i) std::this_thread::sleep_for(100us);
  return clock.next_deadline() == std::optional(deadline);
}

TEST(CatchUpQueue, AFailedCatchUpIsRetriedAfterABackoffThatDoublesUpToTheMost) {
  auto clock = std::make_shared<VirtualClock>(t0());
  Attempts attempts(4);
  CatchUpQueue queue(
      clock, [&](const std::shared_ptr<Entry>&, nanoseconds backoff) { return attempts.attempt(backoff); }, 1s, 3s);
  auto entry = std::make_shared<Entry>();
  queue.add(entry);  // before start(): due when it starts
  const auto start = clock->steady_now();
  queue.start();
  ASSERT_TRUE(attempts.wait_for(1));
  ASSERT_TRUE(reaches_deadline(*clock, start + 1s));
  clock->advance(1s);
  ASSERT_TRUE(attempts.wait_for(2));
  ASSERT_TRUE(reaches_deadline(*clock, start + 3s));
  clock->advance(2s);
  ASSERT_TRUE(attempts.wait_for(3));
  ASSERT_TRUE(reaches_deadline(*clock, start + 6s));  // 4 s capped at 3 s
  clock->advance(3s);
  ASSERT_TRUE(attempts.wait_for(4));
  EXPECT_EQ(attempts.backoffs(), (std::vector<nanoseconds>{1s, 2s, 3s, 3s}));
  ASSERT_TRUE(reaches_deadline(*clock, start + 6s + 1h));  // settled: nothing left but the idle wait
  queue.stop();
  queue.join();
}

TEST(CatchUpQueue, AnEntryGoneBeforeItsTurnIsNotAttempted) {
  auto clock = std::make_shared<VirtualClock>(t0());
  Attempts attempts(1);
  CatchUpQueue queue(
      clock, [&](const std::shared_ptr<Entry>&, nanoseconds backoff) { return attempts.attempt(backoff); }, 1s, 30s);
  queue.add(std::make_shared<Entry>());  // freed at once: only a weak reference is queued
  auto kept = std::make_shared<Entry>();
  queue.add(kept);
  const auto start = clock->steady_now();
  queue.start();
  ASSERT_TRUE(attempts.wait_for(1));
  ASSERT_TRUE(reaches_deadline(*clock, start + 1h));
  queue.stop();
  queue.join();
  EXPECT_EQ(attempts.backoffs().size(), 1U);
}


/// The scheduler as FleetControls sees it: one entry table, and a record
/// of what the controls asked of it.
class RecordingHost final : public FleetControls::Host, private FleetControls::EntryTable {
 public:
  explicit RecordingHost(std::shared_ptr<VirtualClock> clock) : clock_(std::move(clock)) {}
  std::shared_ptr<Entry> add(const std::string& key, EntryId id) {
    auto entry = std::make_shared<Entry>();
    entry->identity.id = id;
    entry->identity.key = key;
    entries_.push_back(entry);
    return entry;
  }

  Instant fleet_now() override { return clock_->now(); }
  void with_entries(const std::function<void(EntryTable&)>& apply) override { apply(*this); }
  std::string queue_manual(const std::shared_ptr<Entry>& entry, Instant scheduled_at) override {
    queued.emplace_back(entry->identity.key, scheduled_at);
    return {};
  }
  std::string settings_refusal() override { return refusal; }
  void publish(Event) override {}
  void log(LogLevel level, const std::string& message) override {
    if (level == LogLevel::warning) warnings.push_back(message);
  }

  std::vector<std::pair<std::string, bool>> pauses;  // key, paused
  std::vector<std::pair<std::string, Instant>> queued;  // key, scheduled instant
  std::vector<std::string> warnings;
  std::string refusal;

 private:
  std::shared_ptr<Entry> find(const std::string& job_key) const override {
    for (const auto& entry : entries_) {
      if (entry->identity.key == job_key) return entry;
    }
    return nullptr;
  }
  void set_paused(const std::shared_ptr<Entry>& entry, bool paused, std::vector<Event>&) override {
    pauses.emplace_back(entry->identity.key, paused);
  }

  std::shared_ptr<VirtualClock> clock_;
  std::vector<std::shared_ptr<Entry>> entries_;
};

struct ControlsFixture {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(t0());
  std::shared_ptr<MemoryFleetState> store = std::make_shared<MemoryFleetState>(clock);
  RecordingHost host{clock};
  FleetControls controls{host, store, "replica-a", clock};
};

TEST(FleetControls, APauseIsAppliedOnceAndItsResumeUndoesIt) {
  ControlsFixture f;
  f.host.add("job", 1);
  ASSERT_EQ(f.store->set_paused("job", true, "operator", f.clock->now()).status, ControlChange::Status::changed);
  f.controls.poll();
  f.controls.poll();  // nothing changed: nothing applied again
  ASSERT_EQ(f.host.pauses, (std::vector<std::pair<std::string, bool>>{{"job", true}}));
  f.clock->advance(1s);
  ASSERT_EQ(f.store->set_paused("job", false, "operator", f.clock->now()).status, ControlChange::Status::changed);
  f.controls.poll();
  EXPECT_EQ(f.host.pauses, (std::vector<std::pair<std::string, bool>>{{"job", true}, {"job", false}}));
  EXPECT_TRUE(f.host.warnings.empty());
}

TEST(FleetControls, ATriggerIsTakenOnceAndQueuedAsAManualFireAtItsRequest) {
  ControlsFixture f;
  f.host.add("job", 1);
  const Instant requested_at = f.clock->now();
  const ControlChange requested = f.store->request_trigger("job", "operator", requested_at);
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  f.controls.poll();
  f.clock->advance(1s);
  f.controls.poll();
  ASSERT_EQ(f.host.queued, (std::vector<std::pair<std::string, Instant>>{{"job", requested_at}}));
  const ControlsRead read = f.store->read_controls(f.clock->now());
  ASSERT_EQ(read.taken.size(), 1U);
  EXPECT_EQ(read.taken[0].trigger.id, requested.trigger_id);
  EXPECT_EQ(read.taken[0].trigger.requested_by, "replica-a") << "the tombstone names the taker";
}

TEST(FleetControls, NoTriggerIsTakenAfterStopOrWhileTheSettingsAreRefused) {
  ControlsFixture f;
  f.host.add("job", 1);
  ASSERT_EQ(f.store->request_trigger("job", "operator", f.clock->now()).status, ControlChange::Status::changed);
  f.host.refusal = "this replica's settings differ from the fleet's";
  f.controls.poll();
  EXPECT_TRUE(f.host.queued.empty());
  f.host.refusal.clear();
  f.controls.stop();
  f.controls.poll();
  EXPECT_TRUE(f.host.queued.empty());
  const ControlsRead read = f.store->read_controls(f.clock->now());
  ASSERT_EQ(read.jobs.size(), 1U);
  EXPECT_EQ(read.jobs[0].triggers.size(), 1U) << "left in the store for another replica";
}

TEST(FleetControls, AJobNotRunHereIsLeftAlone) {
  ControlsFixture f;
  f.host.add("other", 1);
  ASSERT_EQ(f.store->request_trigger("job", "operator", f.clock->now()).status, ControlChange::Status::changed);
  ASSERT_EQ(f.store->set_paused("job", true, "operator", f.clock->now()).status, ControlChange::Status::changed);
  f.controls.poll();
  EXPECT_TRUE(f.host.queued.empty());
  EXPECT_TRUE(f.host.pauses.empty());
  EXPECT_EQ(f.store->read_controls(f.clock->now()).jobs.at(0).triggers.size(), 1U);
}

/// One run registered on a watchdog that runs, on a virtual clock.
struct WatchedRun {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(t0());
  detail::Run run;  // before runs: outlives the watchdog, even after a failed assertion
  RunsInProgress runs{clock, 1};
  WorkerSlot& slot = *runs.slots()[0];
  const Clock::SteadyTime start = clock->steady_now();
  bool refused = runs.register_run(run, slot);
  WatchedRun() { runs.start_watchdog(); }
};

TEST(RunsInProgress, ARunPastItsDeadlineIsStoppedAndMarkedTimedOut) {
  WatchedRun w;
  ASSERT_FALSE(w.refused);
  auto& [clock, run, runs, slot, start, refused] = w;
  runs.start_timeout(run, detail::Run::Deadline::run, start + 5s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 5s));
  clock->advance(5s - 1ns);
  ASSERT_TRUE(reaches_deadline(*clock, start + 5s));
  EXPECT_FALSE(run.stop.stop_requested());
  clock->advance(1ns);
  ASSERT_TRUE(reaches_deadline(*clock, start + 6s));  // acted, and idle again
  EXPECT_TRUE(run.stop.stop_requested());
  EXPECT_TRUE(run.timed_out.load());
  EXPECT_FALSE(run.attempt_timed_out.load());
  runs.unregister_run(run, slot);  // the watchdog took it: nothing left to withdraw
  EXPECT_EQ(slot.run, nullptr);
  runs.close();
}

TEST(RunsInProgress, AnAttemptsDeadlineStopsTheAttemptOnlyAndAWithdrawnOneNothing) {
  WatchedRun w;
  ASSERT_FALSE(w.refused);
  auto& [clock, run, runs, slot, start, refused] = w;
  std::stop_source first;
  runs.set_attempt_stop(run, first);
  runs.start_timeout(run, detail::Run::Deadline::attempt, start + 2s);
  runs.end_timeout(run, detail::Run::Deadline::attempt);  // the attempt ended in time
  EXPECT_FALSE(run.attempt_stop.stop_possible()) << "forgotten with its deadline";
  std::stop_source second;
  runs.set_attempt_stop(run, second);
  runs.start_timeout(run, detail::Run::Deadline::attempt, start + 3s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 3s));  // not 2 s: the first one was withdrawn
  clock->advance(3s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 4s));
  EXPECT_FALSE(first.stop_requested());
  EXPECT_TRUE(second.stop_requested());
  EXPECT_TRUE(run.attempt_timed_out.load());
  EXPECT_FALSE(run.stop.stop_requested());
  EXPECT_FALSE(run.timed_out.load());
  runs.end_timeout(run, detail::Run::Deadline::attempt);
  runs.unregister_run(run, slot);
  runs.close();
}

TEST(RunsInProgress, ARunRegisteringAfterAStopBeganIsRefusedAndStopsReachRegisteredRuns) {
  auto clock = std::make_shared<VirtualClock>(t0());
  RunsInProgress runs(clock, 3);
  detail::Run early;
  early.entry_id = 1;
  ASSERT_FALSE(runs.register_run(early, *runs.slots()[0]));
  detail::Run other;
  other.entry_id = 2;
  ASSERT_FALSE(runs.register_run(other, *runs.slots()[1]));
  runs.request_stop_where([](const detail::Run& run) { return run.entry_id == 1; }, true);
  EXPECT_TRUE(early.stop.stop_requested());
  EXPECT_TRUE(early.timed_out.load());
  EXPECT_FALSE(other.stop.stop_requested());
  runs.begin_stopping();
  EXPECT_FALSE(runs.open());
  detail::Run late;
  EXPECT_TRUE(runs.register_run(late, *runs.slots()[2]));
  runs.request_stop_where([](const detail::Run&) { return true; }, false);
  EXPECT_TRUE(other.stop.stop_requested());
  EXPECT_FALSE(other.timed_out.load());
  EXPECT_TRUE(late.stop.stop_requested()) << "found by the scan, as it registered first";
  runs.close();
  runs.unregister_run(early, *runs.slots()[0]);
  runs.unregister_run(other, *runs.slots()[1]);
  runs.unregister_run(late, *runs.slots()[2]);
}

TEST(RunsInProgress, OnlyTheLastLostTermsAreRemembered) {
  RunsInProgress runs(std::make_shared<VirtualClock>(t0()), 1);
  for (std::uint64_t term = 1; term <= RunsInProgress::max_lost_terms; ++term) runs.note_term_lost(term);
  runs.note_term_lost(1);  // known: evicts nothing
  EXPECT_TRUE(runs.term_lost(1));
  runs.note_term_lost(RunsInProgress::max_lost_terms + 1);
  EXPECT_FALSE(runs.term_lost(1)) << "the oldest is forgotten";
  EXPECT_TRUE(runs.term_lost(2));
  EXPECT_TRUE(runs.term_lost(RunsInProgress::max_lost_terms + 1));
  EXPECT_FALSE(runs.term_lost(0)) << "not every term below the highest: NATS terms restart with a bucket";
}

/// An entry whose next instant is `at` seconds after t0().
std::shared_ptr<Entry> entry_at(EntryId id, int at) {
  auto entry = std::make_shared<Entry>();
  entry->identity.id = id;
  entry->next = t0() + std::chrono::seconds{at};
  return entry;
}

TEST(EntryHeap, TheEarliestIsDueFirstAndARescheduledTopTakesItsNewPlace) {
  EntryHeap heap;
  std::vector<std::shared_ptr<Entry>> entries{entry_at(1, 3), entry_at(2, 1), entry_at(3, 2)};
  std::vector<Event> events;
  for (const auto& entry : entries) heap.push(entry, &events);
  EXPECT_EQ(events.size(), 3U);
  EXPECT_EQ(heap.earliest(), std::optional(t0() + 1s));
  EXPECT_EQ(heap.due(t0()), nullptr);
  std::vector<EntryId> order;
  for (int second = 1; second <= 6; ++second) {
    while (HeapItem* due = heap.due(t0() + std::chrono::seconds{second})) {
      order.push_back(due->entry->identity.id);
      Entry& entry = *due->entry;
      entry.next = entry.identity.id == 2 && entry.next < t0() + 4s ? t0() + 4s : Entry::no_instant;
      heap.reschedule_top(nullptr);
    }
  }
  EXPECT_EQ(order, (std::vector<EntryId>{2, 3, 1, 2}));
  EXPECT_EQ(heap.size(), 0U) << "an entry with no next instant leaves the heap";
}

TEST(EntryHeap, StaleItemsAreSkippedAndDroppedOnceTheyOutnumberTheLiveOnes) {
  EntryHeap heap;
  std::vector<std::shared_ptr<Entry>> entries;
  for (EntryId id = 1; id <= 4; ++id) {
    entries.push_back(entry_at(id, static_cast<int>(id)));
    heap.push(entries.back(), nullptr);
  }
  heap.retire(*entries[0]);  // updated: its item is stale, its new one pushed
  entries[0]->next = t0() + 10s;
  heap.push(entries[0], nullptr);
  heap.retire(*entries[1]);  // removed
  entries[1]->removed.store(true);
  heap.compact();
  EXPECT_EQ(heap.size(), 5U) << "2 stale of 5: kept";
  heap.retire(*entries[2]);  // paused
  entries[2]->paused.store(true);
  heap.compact();
  EXPECT_EQ(heap.size(), 2U) << "3 stale of 5: dropped";
  EXPECT_EQ(heap.stale_count(), 0U);
  HeapItem* due = heap.due(t0() + 4s);
  ASSERT_NE(due, nullptr);
  EXPECT_EQ(due->entry->identity.id, 4U);
  heap.push(entry_at(5, 1), nullptr);
  heap.retire(*entries[3]);
  EXPECT_EQ(heap.stale_count(), 1U);
  due = heap.due(t0() + 4s);
  ASSERT_NE(due, nullptr);
  EXPECT_EQ(due->entry->identity.id, 5U);
  due->entry->next = Entry::no_instant;
  heap.reschedule_top(nullptr);
  EXPECT_EQ(heap.due(t0() + 9s), nullptr) << "entry 4's stale item is dropped on the way";
  EXPECT_EQ(heap.stale_count(), 0U);
  EXPECT_EQ(heap.earliest(), std::optional(t0() + 10s));
}

TEST(EntryHeap, APausedEntryOrOneWithoutANextInstantIsNotPushed) {
  EntryHeap heap;
  auto paused = entry_at(1, 1);
  paused->paused.store(true);
  auto done = entry_at(2, 1);
  done->next = Entry::no_instant;
  std::vector<Event> events;
  heap.push(paused, &events);
  heap.push(done, &events);
  EXPECT_EQ(heap.size(), 0U);
  EXPECT_TRUE(events.empty());
  heap.retire(*paused);
  EXPECT_EQ(heap.stale_count(), 0U) << "it had no item to make stale";
}

/// The scheduler as the registry sees it, counting the announcements (each
/// reads the runs once) and when they came.
class AnnouncementsHost final : public RegistryMembership::Host {
 public:
  explicit AnnouncementsHost(std::shared_ptr<VirtualClock> clock) : clock_(std::move(clock)) {}
  Instant fleet_now() override { return clock_->now(); }
  std::uint64_t jobs_digest() override { return 0; }
  std::vector<CataloguedJob> catalogued_jobs(Instant) override { return {}; }
  std::vector<RunningFire> running_fires() override {
    std::lock_guard guard(mutex_);
    at_.push_back(clock_->steady_now());
    return {};
  }
  void report_lost(const std::vector<ReplicaRecord>&) override {}
  void log(LogLevel, const std::string&) override {}
  std::uint64_t mark_runs_read() override { return ++marks_; }
  void runs_listed(std::uint64_t) override {}
  std::vector<Clock::SteadyTime> announced_at() {
    std::lock_guard guard(mutex_);
    return at_;
  }

 private:
  std::atomic<std::uint64_t> marks_{0};
  std::shared_ptr<VirtualClock> clock_;
  std::mutex mutex_;
  std::vector<Clock::SteadyTime> at_;
};

TEST(FleetUpkeep, AnnouncesEveryHeartbeatAndWithinASecondOfARunsStart) {
  auto clock = std::make_shared<VirtualClock>(t0());
  AnnouncementsHost host(clock);
  FleetOptions fleet;
  fleet.state = std::make_shared<MemoryFleetState>(clock);
  fleet.replica_id = "replica-a";
  fleet.registry_heartbeat_interval = 10s;
  RegistryMembership membership(host, fleet, clock);
  membership.start();
  FleetUpkeep upkeep(clock, nullptr, 0s, &membership, fleet.registry_heartbeat_interval);
  const auto start = clock->steady_now();
  upkeep.start();
  ASSERT_TRUE(reaches_deadline(*clock, start + 10s));
  clock->advance(10s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 20s));
  upkeep.note_run_started();
  upkeep.note_run_started();  // a second run before the announcement: still one
  ASSERT_TRUE(reaches_deadline(*clock, start + 11s));
  clock->advance(1s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 21s));
  clock->advance(10s);
  ASSERT_TRUE(reaches_deadline(*clock, start + 31s));
  upkeep.stop();
  EXPECT_EQ(host.announced_at(), (std::vector<Clock::SteadyTime>{start + 10s, start + 11s, start + 21s}));
}

/// A fleet state whose registry reads wait while `closed` is set.
class GatedRegistry final : public fleetcron::test::ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  StoredDocument load_document(DocumentId which) override {
    if (which == Document::registry) {
      std::unique_lock lock(mutex);
      ++entered;
      cv.notify_all();
      cv.wait(lock, [&] { return !closed; });
    }
    return inner_->load_document(which);
  }
  void open() {
    {
      std::lock_guard guard(mutex);
      closed = false;
    }
    cv.notify_all();
  }
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = true;
  int entered = 0;
};

// Runs starting together are announced alone in one announcement: those
// that queued behind the one under way go in the next, together; a job
// another replica runs is answered busy and left out, the others written.
TEST(RegistryMembership, RunsStartingTogetherShareOneAnnouncementAlone) {
  auto clock = std::make_shared<VirtualClock>(t0());
  auto memory = std::make_shared<MemoryFleetState>(clock);
  ReplicaAnnouncement other;
  other.replica_id = "replica-b";
  other.started = clock->now();
  other.runs = {RunningFire{"j3", "j3@1", clock->now(), 1, clock->now(), 0, false}};
  ASSERT_EQ(memory->announce_replica(other, clock->now(), 30s).status, ReplicaAnnounce::Status::accepted);
  auto gated = std::make_shared<GatedRegistry>(memory);
  AnnouncementsHost host(clock);
  FleetOptions fleet;
  fleet.state = gated;
  fleet.replica_id = "replica-a";
  fleet.registry_heartbeat_interval = 10s;
  RegistryMembership membership(host, fleet, clock);
  membership.start();
  constexpr int runs = 6;
  std::vector<RegistryMembership::AloneRun> alone(runs);
  std::vector<ReplicaAnnounce> answers(runs);
  std::atomic<int> written{0};
  for (int i = 0; i < runs; ++i) {
    const std::string job = fmt::format("j{}", i);
    alone[static_cast<std::size_t>(i)] = {RunningFire{job, job + "@2", clock->now(), 2, clock->now(), 0, false},
                                          [&] { ++written; }};
  }
  std::vector<std::thread> threads;
  const auto announce = [&](int i) {
    threads.emplace_back([&, i] { answers[static_cast<std::size_t>(i)] = membership.announce_alone(alone[static_cast<std::size_t>(i)]); });
  };
  announce(0);  // in the store, held at the gate
  {
    std::unique_lock lock(gated->mutex);
    ASSERT_TRUE(gated->cv.wait_for(lock, 10s, [&] { return gated->entered == 1; }));
  }
  for (int i = 1; i < runs; ++i) announce(i);  // queue behind it
  ASSERT_TRUE(fleetcron::test::eventually([&] { return membership.alone_waiting() == runs - 1; }));
  gated->open();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(host.announced_at().size(), 2U) << "one for j0, one for the five that queued";
  for (int i = 0; i < runs; ++i) {
    const auto expected = i == 3 ? ReplicaAnnounce::Status::busy : ReplicaAnnounce::Status::accepted;
    EXPECT_EQ(answers[static_cast<std::size_t>(i)].status, expected) << i << ": " << answers[static_cast<std::size_t>(i)].error;
  }
  EXPECT_EQ(answers[3].busy_on, "replica-b");
  ASSERT_TRUE(answers[3].busy_run);
  EXPECT_EQ(answers[3].busy_run->fire_key, "j3@1");
  EXPECT_EQ(written, runs - 1);
  std::set<std::string> listed;
  for (const auto& record : memory->read_replicas(clock->now()).replicas) {
    if (record.replica.replica_id != "replica-a") continue;
    for (const auto& run : record.replica.runs) listed.insert(run.job_key);
  }
  EXPECT_EQ(listed, (std::set<std::string>{"j1", "j2", "j4", "j5"})) << "the second record: the four it wrote";
}

TEST(FleetUpkeep, PollsTheControlsOnTheirPeriodUntilPollsStop) {
  ControlsFixture f;
  f.host.add("job", 1);
  FleetUpkeep upkeep(f.clock, &f.controls, 5s, nullptr, 0s);
  const auto start = f.clock->steady_now();
  upkeep.start();
  ASSERT_EQ(f.store->request_trigger("job", "operator", f.clock->now()).status, ControlChange::Status::changed);
  ASSERT_TRUE(reaches_deadline(*f.clock, start + 5s));
  EXPECT_TRUE(f.host.queued.empty());
  f.clock->advance(5s);
  ASSERT_TRUE(reaches_deadline(*f.clock, start + 10s));
  EXPECT_EQ(f.host.queued.size(), 1U);
  upkeep.stop_polls();
  ASSERT_TRUE(reaches_deadline(*f.clock, start + 5s + 1h)) << "nothing left to do but the idle wait";
  ASSERT_EQ(f.store->request_trigger("job", "operator", f.clock->now()).status, ControlChange::Status::changed);
  f.clock->advance(1h);
  ASSERT_TRUE(reaches_deadline(*f.clock, start + 5s + 2h));
  EXPECT_EQ(f.host.queued.size(), 1U) << "no poll after stop_polls()";
  upkeep.stop();
}

TEST(RandomDelays, JitterStaysBelowItsBoundAndASeedRepeatsItsDelays) {
  RandomDelays edges(0);  // a random seed
  EXPECT_EQ(edges.below(0ns), 0ns);
  EXPECT_EQ(edges.below(-1s), 0ns);
  EXPECT_EQ(edges.below(1ns), 0ns);
  RandomDelays delays(7);
  RandomDelays same(7);
  bool varied = false;
  nanoseconds first{};
  for (int i = 0; i < 1000; ++i) {
    const nanoseconds drawn = delays.below(10s);
    EXPECT_GE(drawn, 0ns);
    EXPECT_LT(drawn, 10s);
    EXPECT_EQ(drawn, same.below(10s));
    if (i == 0) first = drawn;
    varied = varied || drawn != first;
  }
  EXPECT_TRUE(varied);
}

TEST(RandomDelays, ARetryWaitsLongerEachTimeUpToTheMostAndSpreadsByItsFraction) {
  RandomDelays delays(7);
  RetryPolicy retry;
  retry.initial_delay = 1s;
  retry.multiplier = 2.0;
  retry.max_delay = 5s;
  std::vector<nanoseconds> waits;
  for (int failed = 1; failed <= 5; ++failed) waits.push_back(delays.retry_delay(retry, failed));
  EXPECT_EQ(waits, (std::vector<nanoseconds>{1s, 2s, 4s, 5s, 5s}));
  retry.jitter_fraction = 0.5;
  bool spread = false;
  for (int i = 0; i < 1000; ++i) {
    const nanoseconds wait = delays.retry_delay(retry, 2);
    EXPECT_GE(wait, 1s);
    EXPECT_LE(wait, 3s);
    spread = spread || wait != 2s;
  }
  EXPECT_TRUE(spread);
}

/// The scheduler as the claim path sees it: records the reports.
class ClaimRecordingHost final : public ClaimPath::Host {
 public:
  std::string settings_refusal() override { return refusal; }
  std::string catch_up_pending(const Fire&) override { return pending; }
  void note_unled(const Fire& fire) override { unled.push_back(fire.entry->identity.key); }
  void report_skip(const Fire& fire, SkipReason reason, std::string error) override {
    skips.push_back({fire.entry->identity.key, reason, std::move(error)});
  }
  void report_cancel(const Fire& fire, std::string, CancelReason reason) override {
    cancels.emplace_back(fire.entry->identity.key, reason);
  }
  void publish(Event) override {}
  void log(LogLevel, const std::string&) override {}

  struct Skip {
    std::string key;
    SkipReason reason;
    std::string error;
  };
  std::string refusal;
  std::string pending;
  std::vector<std::string> unled;
  std::vector<Skip> skips;
  std::vector<std::pair<std::string, CancelReason>> cancels;
};

/// Answers what it is told, in one round trip per call; or throws.
class ScriptedClaimer final : public Claimer {
 public:
  ClaimResult claim(std::string_view key) override { return claim_batch(std::vector<std::string>{std::string(key)}).at(0); }
  std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override {
    ++round_trips;
    if (!error.empty()) throw std::runtime_error(error);
    std::vector<ClaimResult> results;
    for (const auto& key : keys) {
      if (taken.contains(key)) {
        results.push_back(ClaimResult::taken());
      } else {
        results.push_back(ClaimResult::claimed(++fence));
      }
    }
    if (short_answer && !results.empty()) results.pop_back();
    return results;
  }
  std::chrono::nanoseconds dedup_window() const override { return window; }

  std::set<std::string> taken;
  std::string error;
  bool short_answer = false;
  std::chrono::nanoseconds window = 1min;
  std::uint64_t fence = 100;
  int round_trips = 0;
};

class ScriptedElector final : public Elector {
 public:
  Leadership is_leader() override { return answer; }
  Leadership answer = Leadership::follower();
};

struct ClaimFixture {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(t0());
  ClaimRecordingHost host;
  std::shared_ptr<ScriptedClaimer> claimer = std::make_shared<ScriptedClaimer>();
  std::shared_ptr<ScriptedElector> elector = std::make_shared<ScriptedElector>();
  LeaderFitness fitness{clock};
  RunsInProgress runs{clock, 1};

  ClaimPath path(bool with_elector) {
    return ClaimPath(host, {with_elector ? elector : nullptr, true, false}, clock, fitness, runs);
  }
  Fire fire(const std::string& key, bool leader_gated, Instant at) {
    auto entry = std::make_shared<Entry>();
    entry->identity.key = key;
    auto settings = std::make_shared<EntrySettings>();
    settings->claimer = claimer;
    settings->leader_gated = leader_gated;
    entry->settings = settings;
    return Fire{entry, at};
  }
};

TEST(ClaimPath, OneRoundTripGrantsEachFireItsFenceOrSkipsItAsAlreadyClaimed) {
  ClaimFixture f;
  ClaimPath path = f.path(false);
  std::vector<Fire> fires{f.fire("a", false, t0()), f.fire("b", false, t0()), f.fire("c", false, t0())};
  f.claimer->taken.insert(fire_key("b", t0()));
  path.screen(fires, path.elect());
  for (const Fire& fire : fires) EXPECT_EQ(fire.state, FireState::claiming);
  path.claim(fires);
  EXPECT_EQ(f.claimer->round_trips, 1);
  EXPECT_EQ(fires[0].state, FireState::granted);
  EXPECT_EQ(fires[0].grant.fence, 101U);
  EXPECT_TRUE(ClaimPath::claimed(fires[0]));
  EXPECT_EQ(fires[1].state, FireState::dropped);
  EXPECT_EQ(fires[2].grant.fence, 102U);
  ASSERT_EQ(f.host.skips.size(), 1U);
  EXPECT_EQ(f.host.skips[0].key, "b");
  EXPECT_EQ(f.host.skips[0].reason, SkipReason::already_claimed);
}

TEST(ClaimPath, AClaimerThatThrowsOrAnswersShortFailsEveryFire) {
  for (const bool throws : {true, false}) {
    ClaimFixture f;
    ClaimPath path = f.path(false);
    if (throws) f.claimer->error = "connection reset";
    f.claimer->short_answer = !throws;
    std::vector<Fire> fires{f.fire("a", false, t0()), f.fire("b", false, t0())};
    path.screen(fires, path.elect());
    path.claim(fires);
    ASSERT_EQ(f.host.skips.size(), 2U);
    for (const auto& skip : f.host.skips) {
      EXPECT_EQ(skip.reason, SkipReason::claim_error);
      EXPECT_NE(skip.error.find(throws ? "connection reset" : "returned 1 results for 2"), std::string::npos) << skip.error;
    }
    EXPECT_FALSE(ClaimPath::claimed(fires[0]));
  }
}

TEST(ClaimPath, AFollowersFiresAreSkippedAndReachedByTheCatchUpAndALostTermIsRefused) {
  ClaimFixture f;
  ClaimPath path = f.path(true);
  std::vector<Fire> fires{f.fire("a", true, t0())};
  path.screen(fires, path.elect());
  ASSERT_EQ(f.host.skips.size(), 1U);
  EXPECT_EQ(f.host.skips[0].reason, SkipReason::not_leader);
  EXPECT_EQ(f.host.unled, std::vector<std::string>{"a"});
  f.elector->answer = Leadership::leader(5);
  const Election election = path.elect();
  ASSERT_FALSE(election.refused);
  EXPECT_EQ(path.leadership_changed(election.grant), "");
  f.runs.note_term_lost(5);  // lost between the election and the claim
  fires = {f.fire("b", true, t0())};
  path.screen(fires, election);
  ASSERT_EQ(f.host.skips.size(), 2U);
  EXPECT_EQ(f.host.skips[1].error, "leadership of term 5 was lost");
  f.elector->answer = Leadership::leader(6);
  EXPECT_NE(path.leadership_changed(election.grant).find("changed during the jitter (5 to 6)"), std::string::npos);
  EXPECT_EQ(f.claimer->round_trips, 0);
}

TEST(ClaimPath, AFireOlderThanTheDedupWindowIsSkippedAsStaleUnlessItIsARecovery) {
  ClaimFixture f;
  ClaimPath path = f.path(false);
  const Instant old = f.clock->now() - f.claimer->window - 1s;
  std::vector<Fire> fires{f.fire("a", false, old), f.fire("b", false, old)};
  fires[1].kind = FireKind::recovery;
  fires[1].recovery = 1;
  EXPECT_FALSE(path.staleness_now(fires[0]).empty());
  EXPECT_TRUE(path.beyond_window(fires[1]));
  path.screen(fires, path.elect());
  path.claim(fires);
  ASSERT_EQ(f.host.skips.size(), 1U);
  EXPECT_EQ(f.host.skips[0].reason, SkipReason::stale);
  EXPECT_EQ(fires[1].state, FireState::granted) << "a lost run's re-run is claimed under its own key";
  EXPECT_EQ(ClaimPath::claim_key(fires[1]), fire_key("b", old) + "#recover1");
}

TEST(ClaimPath, RefusedSettingsAPendingCatchUpAndAStopEachKeepAFireFromItsClaim) {
  ClaimFixture f;
  ClaimPath path = f.path(false);
  std::vector<Fire> fires{f.fire("a", false, t0())};
  f.host.refusal = "this replica's settings differ from the fleet's";
  path.screen(fires, path.elect());
  f.host.refusal.clear();
  f.host.pending = "its catch-up is under way";
  fires = {f.fire("b", false, t0())};
  path.screen(fires, path.elect());
  f.host.pending.clear();
  f.runs.begin_stopping();
  fires = {f.fire("c", false, t0())};
  path.screen(fires, path.elect());
  ASSERT_EQ(f.host.skips.size(), 2U);
  EXPECT_EQ(f.host.skips[0].reason, SkipReason::fleet_settings);
  EXPECT_EQ(f.host.skips[1].reason, SkipReason::claim_error);
  ASSERT_EQ(f.host.cancels.size(), 1U);
  EXPECT_EQ(f.host.cancels[0], std::make_pair(std::string("c"), CancelReason::scheduler_stopped));
  EXPECT_EQ(f.claimer->round_trips, 0);
}

}  // namespace
}  // namespace fleetcron::detail
