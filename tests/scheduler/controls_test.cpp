// Fleet-wide controls as the scheduler applies them (docs/fleet-state.md#controls):
// a pause every replica honours, a restarted one included, and a trigger
// run by exactly one replica. Memory stores on a virtual clock; Redis and
// NATS in tests/e2e/.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "scheduler/harness.h"
#include "support/forwarding_fleet_state.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

/// Replicas of one fleet on one memory fleet state and claimer, each with
/// "* * * * *" under key "job", counting runs (manual ones apart).
class ControlledFleet {
 public:
  explicit ControlledFleet(Harness& h, std::shared_ptr<FleetState> state = nullptr)
      : h_(h),
        state_(state ? std::move(state) : std::make_shared<MemoryFleetState>(h.clock)),
        claimer_(std::make_shared<MemoryClaimer>(h.clock, 10min)) {}

  Scheduler& add_replica() {
    auto options = h_.options();
    options.fleet.state = state_;
    options.claimer = claimer_;
    options.fleet.catch_up_reach = catch_up_reach;
    options.fleet.replica_id = "replica-" + std::to_string(replicas_.size());
    replicas_.push_back(std::make_unique<Scheduler>(options));
    EntryOptions entry;
    entry.key = "job";
    entry.missed_fire = MissedFirePolicy::run_all;  // a catch-up would show as every instant missed
    replicas_.back()->add("* * * * *", [this](const FireContext& c, std::stop_token) {
      std::lock_guard guard(mutex_);
      (c.manual ? manual_ : scheduled_) += 1;
      if (c.manual) manual_instants_.push_back(c.scheduled_at);
    }, entry);
    replicas_.back()->start();
    return *replicas_.back();
  }

  /// Lets each replica's upkeep thread read the controls once more, and
  /// waits until every replica shows the job `paused`.
  void poll_until_paused(bool paused) {
    // Each replica's loop, watchdog, catch-up and upkeep threads wait on
    // the clock: the upkeep threads' next look is then 1 s away.
    h_.settle(4 * replicas_.size());
    h_.clock->advance(1s);
    ASSERT_TRUE(Harness::eventually([&] {
      return std::all_of(replicas_.begin(), replicas_.end(),
                         [&](const auto& r) { return r->entries().front().paused == paused; });
    }));
  }

  /// Lets `seconds` pass one second at a time, each replica's controls
  /// thread reading the controls at each.
  void looks(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      h_.settle(4 * replicas_.size());
      h_.clock->advance(std::chrono::seconds{1});
    }
  }

  /// Lets every replica run what it queued, each drained.
  void drain() {
    h_.settle(4 * replicas_.size());
    for (auto& replica : replicas_) EXPECT_TRUE(replica->drain(h_.soon()));
  }
  /// The jobs the controls hold now (paused, or with triggers waiting).
  std::vector<JobControl> controls() {
    const ControlsRead read = state_->read_controls(h_.clock->now());
    EXPECT_EQ(read.status, ControlsRead::Status::found) << read.error;
    return read.jobs;
  }

  int scheduled() {
    std::lock_guard guard(mutex_);
    return scheduled_;
  }
  int manual() {
    std::lock_guard guard(mutex_);
    return manual_;
  }
  std::vector<Instant> manual_instants() {
    std::lock_guard guard(mutex_);
    return manual_instants_;
  }
  FleetState& state() { return *state_; }
  /// Catch-up is off unless a test turns it on.
  std::chrono::nanoseconds catch_up_reach = 0ns;
  std::vector<std::unique_ptr<Scheduler>>& replicas() { return replicas_; }

 private:
  Harness& h_;
  std::shared_ptr<FleetState> state_;
  std::shared_ptr<MemoryClaimer> claimer_;
  std::mutex mutex_;
  int scheduled_ = 0, manual_ = 0;
  std::vector<Instant> manual_instants_;
  std::vector<std::unique_ptr<Scheduler>> replicas_;  // last: destroyed (stopped) first
};

TEST(SchedulerControls, AFleetPauseHoldsEveryReplicaARestartedOneTooUntilResumed) {
  Harness h;
  ControlledFleet fleet(h);
  fleet.add_replica();
  fleet.add_replica();
  ASSERT_EQ(fleet.state().set_paused("job", true, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(true);
  // A replica started while the job is paused reads the pause in start(),
  // before its loop could fire anything.
  Scheduler& late = fleet.add_replica();
  EXPECT_TRUE(late.entries().front().paused);
  h.advance(60s, 3);
  h.settle(Harness::idle_waiters);
  EXPECT_EQ(fleet.scheduled(), 0);
  ASSERT_EQ(fleet.state().set_paused("job", false, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(false);
  h.advance(60s, 1, [&] { return fleet.scheduled() == 1; });  // one run for the fleet: the claims still decide
  for (auto& replica : fleet.replicas()) EXPECT_TRUE(replica->stop(h.soon()));
  EXPECT_EQ(fleet.scheduled(), 1);
}

// A replica started while the job is paused fleet-wide does not replay the
// paused period when the fleet resumes it: the resume starts from now.
TEST(SchedulerControls, AResumeAfterARestartDuringAPauseReplaysNothing) {
  Harness h;
  ControlledFleet fleet(h);
  fleet.catch_up_reach = 24h;
  Scheduler& first = fleet.add_replica();
  h.advance(60s, 1, [&] { return fleet.scheduled() == 1; });  // the cursor moves to minute 1
  ASSERT_TRUE(first.drain(h.soon()));
  ASSERT_EQ(fleet.state().set_paused("job", true, "operator", h.clock->now()).status, ControlChange::Status::changed);
  h.clock->advance(10min);  // ten instants pass while nothing runs
  Scheduler& restarted = fleet.add_replica();
  EXPECT_TRUE(restarted.entries().front().paused);
  ASSERT_EQ(fleet.state().set_paused("job", false, "operator", h.clock->now()).status, ControlChange::Status::changed);
  h.settle(Harness::idle_waiters + 2);  // its loop, watchdog, catch-up and upkeep threads
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] { return !restarted.entries().front().paused; }));
  h.advance(60s, 1, [&] { return fleet.scheduled() == 2; });  // the next instant, on time
  h.settle(Harness::idle_waiters + 2);
  ASSERT_TRUE(restarted.drain(h.soon()));
  EXPECT_EQ(fleet.scheduled(), 2) << "the paused minutes were caught up";
}

TEST(SchedulerControls, ATriggerRunsOnceAcrossTheFleetAtItsRequestedInstant) {
  Harness h;
  ControlledFleet fleet(h);
  for (int i = 0; i < 3; ++i) fleet.add_replica();
  const Instant asked = h.clock->now() + 10s;
  h.clock->advance(10s);
  const ControlChange requested = fleet.state().request_trigger("job", "operator", asked);
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  h.settle(4 * fleet.replicas().size());
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] { return fleet.manual() == 1; }));
  // Every replica reads the controls twice more, and drains what it queued:
  // a second run of the trigger would be counted.
  fleet.looks(2);
  fleet.drain();
  EXPECT_EQ(fleet.manual(), 1);
  EXPECT_EQ(fleet.manual_instants(), std::vector<Instant>{cursor_instant(asked)});
  const ControlsRead read = fleet.state().read_controls(h.clock->now());
  ASSERT_EQ(read.status, ControlsRead::Status::found) << read.error;
  EXPECT_TRUE(read.jobs.empty()) << "the trigger was taken";
  ASSERT_TRUE(ledger_reaches(fleet.state(), "job", [](const std::vector<FireRecord>& records) {
    return !records.empty() && records.front().fate == FireFate::succeeded;
  }));
  EXPECT_TRUE(ledger_of(fleet.state(), "job").front().manual);
}

// A trigger no replica takes (a job no replica runs) expires: exactly one
// replica drops it and reports it, in the ledger and in its log.
TEST(SchedulerControls, ATriggerThatExpiresUntakenLeavesOneRecordAndALogLine) {
  Harness h;
  ControlledFleet fleet(h);
  for (int i = 0; i < 2; ++i) fleet.add_replica();
  const Instant asked = h.clock->now();
  const ControlChange requested = fleet.state().request_trigger("nobody-runs-it", "operator", asked, 2s);
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  fleet.looks(4);  // past its 2 s wait, and two more looks
  h.settle(4 * fleet.replicas().size());
  const ControlsRead read = fleet.state().read_controls(h.clock->now() - 10s);
  ASSERT_EQ(read.status, ControlsRead::Status::found) << read.error;
  EXPECT_TRUE(read.jobs.empty()) << "dropped from the document, not only filtered";
  // Written by the reporter's ledger writer, on the ledger's thread.
  ASSERT_TRUE(ledger_reaches(fleet.state(), "nobody-runs-it",
                             [](const std::vector<FireRecord>& records) { return !records.empty(); }));
  const std::vector<FireRecord> records = ledger_of(fleet.state(), "nobody-runs-it");
  ASSERT_EQ(records.size(), 1u);
  const FireRecord& record = records.front();
  EXPECT_EQ(record.fate, FireFate::skipped);
  EXPECT_EQ(record.reason, "trigger-expired");
  EXPECT_TRUE(record.manual);
  EXPECT_EQ(record.scheduled_at, cursor_instant(asked));
  EXPECT_NE(record.fire_key.find(requested.trigger_id), std::string::npos) << record.fire_key;
  // The record is the event's (the ledger's one writer derives it, before
  // the recorder sees the event): one event in the whole fleet.
  ASSERT_TRUE(h.log->wait_tally<TriggerExpiredEvent>(1));
  const auto events = h.log->all<TriggerExpiredEvent>();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events.front().trigger_id, requested.trigger_id);
  EXPECT_EQ(events.front().requested_by, "operator");
  EXPECT_EQ(events.front().job_key, "nobody-runs-it");
  EXPECT_NE(record.error.find("no replica took it"), std::string::npos) << record.error;
  std::lock_guard guard(h.messages_mutex);
  const auto lines = std::count_if(h.messages.begin(), h.messages.end(), [&](const std::string& m) {
    return m.find("trigger " + requested.trigger_id) != std::string::npos && m.find("did not run") != std::string::npos;
  });
  EXPECT_EQ(lines, 1) << "reported by the one replica whose write dropped it";
}

// Controls whose next write after `lose_next` is applied but answered
// with an error (a timeout after the store applied it).
class LostControlsAnswer final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    const DocumentReplace answer = ForwardingFleetState::replace_document(which, seen, text, keep_for);
    if (which != Document::controls || answer.status != DocumentReplace::Status::written || !lose_next.exchange(false)) {
      return answer;
    }
    if (unreadable_after) failing_loads = 1;
    return {DocumentReplace::Status::error, "timeout (applied)"};
  }
  StoredDocument load_document(DocumentId which) override {
    if (which == Document::controls && failing_loads > 0) {
      --failing_loads;
      return {StoredDocument::Status::error, {}, 0, "timeout"};
    }
    return ForwardingFleetState::load_document(which);
  }
  std::atomic<bool> lose_next{false};
  std::atomic<bool> unreadable_after{false};  // the next read of the controls fails too
  std::atomic<int> failing_loads{0};
};

// Found by the simulator (seed 210, both): a take whose answer was lost,
// and whose confirming read failed too, was logged "not taken" although
// the store held its tombstone naming this replica: the trigger never ran.
// It is looked at again at the next poll, and run there.
TEST(SchedulerControls, ATakeWhoseAnswerAndCheckWereLostRunsAtTheNextPoll) {
  Harness h;
  auto state = std::make_shared<LostControlsAnswer>(std::make_shared<MemoryFleetState>(h.clock));
  ControlledFleet fleet(h, state);
  fleet.add_replica();
  const ControlChange requested = fleet.state().request_trigger("job", "operator", h.clock->now());
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  state->unreadable_after = true;
  state->lose_next = true;  // the take lands, its answer and the read after it fail
  fleet.looks(3);
  ASSERT_TRUE(Harness::eventually([&] { return fleet.manual() == 1; }));
  EXPECT_FALSE(state->lose_next);
  EXPECT_EQ(state->failing_loads, 0);
}

// Found by the simulator: a replica whose drop of an expired trigger was
// applied but answered with an error logged "not dropped", and the next
// look found nothing to drop: the trigger went unreported. It now reports
// those it saw expired that the next look no longer lists.
TEST(SchedulerControls, AnExpiredTriggerWhoseDropAnswerWasLostIsStillRecorded) {
  Harness h;
  auto state = std::make_shared<LostControlsAnswer>(std::make_shared<MemoryFleetState>(h.clock));
  ControlledFleet fleet(h, state);
  fleet.add_replica();
  const Instant asked = h.clock->now();
  const ControlChange requested = fleet.state().request_trigger("nobody-runs-it", "operator", asked, 2s);
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  state->lose_next = true;  // the drop's write lands, its answer is lost
  fleet.looks(4);
  h.settle(4);
  EXPECT_FALSE(state->lose_next) << "the drop was written";
  ASSERT_TRUE(Harness::eventually([&] {
    const LedgerRead ledger = fleet.state().read_fires("nobody-runs-it", 10);
    return ledger.status == LedgerRead::Status::found && ledger.records.size() == 1 &&
           ledger.records.front().reason == "trigger-expired";
  }));
  std::lock_guard guard(h.messages_mutex);
  EXPECT_TRUE(std::any_of(h.messages.begin(), h.messages.end(), [&](const std::string& m) {
    return m.find("trigger " + requested.trigger_id) != std::string::npos && m.find("answer was lost") != std::string::npos;
  }));
}

// A store that goes back (Redis restarted from its last snapshot, a
// failover to a lagging replica) lists a trigger that was taken and run:
// a replica that saw it go, or that read the controls without it more
// than a minute after its request, drops it; it does not run again.
TEST(SchedulerControls, ATakenTriggerThatComesBackWithTheStoreIsNotRunAgain) {
  Harness h;
  auto memory = std::make_shared<MemoryFleetState>(h.clock);
  ControlledFleet fleet(h, memory);
  for (int i = 0; i < 2; ++i) fleet.add_replica();
  const ControlChange requested = fleet.state().request_trigger("job", "operator", h.clock->now());
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  using Document = FleetState::Document;
  const FleetState::StoredDocument snapshot = memory->load_document(Document::controls);
  ASSERT_EQ(snapshot.status, FleetState::StoredDocument::Status::found);
  fleet.looks(3);  // taken and run, then seen gone by both
  ASSERT_TRUE(Harness::eventually([&] { return fleet.manual() == 1; }));
  fleet.looks(61);  // a minute later: recognised by its age too
  const FleetState::StoredDocument current = memory->load_document(Document::controls);
  ASSERT_EQ(memory->replace_document(Document::controls, current, snapshot.text, 0ns).status,
            FleetState::DocumentReplace::Status::written);
  fleet.looks(3);
  fleet.drain();
  EXPECT_EQ(fleet.manual(), 1) << "not run again";
  EXPECT_TRUE(fleet.controls().empty()) << "dropped";
  std::lock_guard guard(h.messages_mutex);
  EXPECT_EQ(std::count_if(h.messages.begin(), h.messages.end(), [&](const std::string& m) {
              return m.find("trigger " + requested.trigger_id) != std::string::npos &&
                     m.find("came back after it was taken") != std::string::npos;
            }),
            1);
}

// A store that went back (a restart from an older snapshot, a failover to
// a replica behind) loses a pause or a resume the replicas applied: each
// replica says so (what was lost, when, by whom, what to do), and the
// fleet follows the store, which every replica and every later one reads.
TEST(SchedulerControls, APauseOrResumeTheStoreLostIsReportedByTheReplicasThatAppliedIt) {
  Harness h;
  auto memory = std::make_shared<MemoryFleetState>(h.clock);
  ControlledFleet fleet(h, memory);
  for (int i = 0; i < 2; ++i) fleet.add_replica();
  using Document = FleetState::Document;
  const auto go_back_to = [&](const std::string& text) {
    const FleetState::StoredDocument current = memory->load_document(Document::controls);
    ASSERT_EQ(memory->replace_document(Document::controls, current, text, 0ns).status,
              FleetState::DocumentReplace::Status::written);
  };
  const auto warnings = [&](std::string_view what) {
    std::lock_guard guard(h.messages_mutex);
    return std::count_if(h.messages.begin(), h.messages.end(), [&](const std::string& m) {
      return m.find("the fleet state lost its " + std::string(what)) != std::string::npos;
    });
  };
  // A pause lost with its whole record: the snapshot had none.
  ASSERT_EQ(fleet.state().set_paused("job", true, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(true);
  go_back_to("");
  fleet.poll_until_paused(false);
  // Logged once the poll applied it: waited for, not assumed.
  EXPECT_TRUE(Harness::eventually([&] { return warnings("pause") == 2; })) << "one per replica that applied it";
  // A resume lost to an older record: the snapshot has the pause.
  ASSERT_EQ(fleet.state().set_paused("job", true, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(true);
  const std::string paused = memory->load_document(Document::controls).text;
  h.clock->advance(1s);
  ASSERT_EQ(fleet.state().set_paused("job", false, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(false);
  go_back_to(paused);
  fleet.poll_until_paused(true);
  EXPECT_TRUE(Harness::eventually([&] { return warnings("resume") == 2; })) << warnings("resume");
  fleet.looks(2);
  EXPECT_EQ(warnings("resume"), 2);
  EXPECT_EQ(warnings("pause"), 2) << "nothing else said";
}

// Resume lines count towards the controls' bounds and make room, oldest
// first: a fleet that resumed many jobs with long keys can still pause
// others (here the 256 KiB bound binds first). Few long lines: each edit
// reads and writes the whole document, and the sanitizer passes run this
// beside timing-sensitive tests.
TEST(SchedulerControls, ResumeLinesMakeRoomOldestFirst) {
  Harness h;
  MemoryFleetState state(h.clock);
  const std::string pad(16'000, 'k');
  const auto key = [&](const char* kind, int i) { return fmt::format("{}-{}-{}", kind, i, pad); };
  Instant at = h.clock->now();
  for (int i = 0; i < 10; ++i, at += 1ms) {
    ASSERT_EQ(state.set_paused(key("resumed", i), true, "operator", at).status, ControlChange::Status::changed) << i;
    ASSERT_EQ(state.set_paused(key("resumed", i), false, "operator", at).status, ControlChange::Status::changed) << i;
  }
  for (int i = 0; i < 10; ++i) {
    const ControlChange paused = state.set_paused(key("paused", i), true, "operator", at);
    ASSERT_EQ(paused.status, ControlChange::Status::changed) << i << ": " << paused.error;
  }
  const ControlsRead read = state.read_controls(at);
  EXPECT_EQ(read.jobs.size(), 10u);
  ASSERT_FALSE(read.resumed.empty());
  EXPECT_LT(read.resumed.size(), 10u) << "the oldest made room";
  const auto listed = [&](const std::string& job_key) {
    return std::any_of(read.resumed.begin(), read.resumed.end(), [&](const JobControl& c) { return c.job_key == job_key; });
  };
  EXPECT_TRUE(listed(key("resumed", 9)));
  EXPECT_FALSE(listed(key("resumed", 0)));
  EXPECT_LE(format_job_controls(read.jobs).size() + format_job_controls(read.resumed).size(), max_controls_bytes);
}

// A trigger request sent again with its request id (a retry after a lost
// answer) once its trigger ran finds its tombstone: nothing runs again.
TEST(SchedulerControls, ARequestSentAgainAfterItsTriggerRanRunsNothing) {
  Harness h;
  ControlledFleet fleet(h);
  for (int i = 0; i < 2; ++i) fleet.add_replica();
  const auto request = [&] {
    return fleet.state().request_trigger("job", "operator", h.clock->now(), default_trigger_wait, "retried-request");
  };
  const ControlChange first = request();
  ASSERT_EQ(first.status, ControlChange::Status::changed) << first.error;
  fleet.looks(3);  // taken and run, then seen gone by both
  ASSERT_TRUE(Harness::eventually([&] { return fleet.manual() == 1; }));
  const ControlChange again = request();
  EXPECT_EQ(again.status, ControlChange::Status::unchanged) << "its tombstone names it taken";
  EXPECT_EQ(again.trigger_id, first.trigger_id);
  fleet.looks(3);
  fleet.drain();
  EXPECT_EQ(fleet.manual(), 1) << "the retry ran nothing";
  EXPECT_TRUE(fleet.controls().empty()) << "dropped";
}

// A fleet state whose controls cannot be read while `failing` is set.
class UnreadableControls final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  StoredDocument load_document(DocumentId which) override {
    if (failing && which == Document::controls) return {StoredDocument::Status::error, {}, 0, "store down"};
    return ForwardingFleetState::load_document(which);
  }
  std::atomic<bool> failing{false};
};

TEST(SchedulerControls, UnreadableControlsAreLoggedOnceAndChangeNothing) {
  Harness h;
  auto state = std::make_shared<UnreadableControls>(std::make_shared<MemoryFleetState>(h.clock));
  ControlledFleet fleet(h, state);
  ASSERT_EQ(state->set_paused("job", true, "operator", h.clock->now()).status, ControlChange::Status::changed);
  Scheduler& replica = fleet.add_replica();
  EXPECT_TRUE(replica.entries().front().paused);
  state->failing = true;
  for (int i = 0; i < 3; ++i) {
    h.clock->advance(1s);
    h.settle(Harness::idle_waiters + 2);  // and the catch-up and upkeep threads
  }
  EXPECT_TRUE(replica.entries().front().paused) << "an outage resumes nothing";
  {
    std::lock_guard guard(h.messages_mutex);
    EXPECT_EQ(std::count_if(h.messages.begin(), h.messages.end(),
                            [](const std::string& m) { return m.find("fleet controls unreadable") != std::string::npos; }),
              1);
  }
  state->failing = false;
  ASSERT_EQ(state->set_paused("job", false, "operator", h.clock->now()).status, ControlChange::Status::changed);
  fleet.poll_until_paused(false);
  EXPECT_TRUE(replica.stop(h.soon()));
}

TEST(SchedulerControls, ThePollIntervalIsValidated) {
  Harness h;
  auto options = h.options();
  options.fleet.control_poll_interval = 5ms;
  try {
    Scheduler s(options);
    FAIL() << "accepted a 5ms poll interval";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("control_poll_interval: 5ms is not between 10ms and 1m"), std::string::npos)
        << e.what();
  }
}

// ---- pause on failure (EntryOptions::pause_on_failure) -------------------

/// A fleet state whose controls refuse writes while `refusing` is set.
class RefusingControls final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    if (which.which == Document::controls && refusing.load()) return {DocumentReplace::Status::error, "store down"};
    return inner_->replace_document(which, seen, text, keep_for);
  }
  std::atomic<bool> refusing{false};
};

/// Replicas with "* * * * *" under key "job", pause_on_failure set,
/// failing while `failing` is set, each run held while `hold` is; counting runs.
struct FailingFleet {
  explicit FailingFleet(Harness& harness, std::shared_ptr<FleetState> fleet_state)
      : h(harness), state(std::move(fleet_state)), claimer(std::make_shared<MemoryClaimer>(h.clock, 10min)) {}

  Scheduler& add_replica() {
    auto options = h.options();
    options.fleet.state = state;
    options.claimer = claimer;
    options.fleet.catch_up_reach = 0ns;
    options.fleet.replica_id = "replica-" + std::to_string(replicas.size());
    options.fleet.registry = registry;
    replicas.push_back(std::make_unique<Scheduler>(options));
    EntryOptions entry;
    entry.key = "job";
    entry.pause_on_failure = true;
    entry.overlap = overlap;
    entry.scope = scope;
    replicas.back()->add("* * * * *", [this](const FireContext&, std::stop_token) {
      ++runs;
      while (hold.load()) std::this_thread::yield();
      if (failing.load()) throw std::runtime_error("exit 1");
    }, entry);
    replicas.back()->start();
    return *replicas.back();
  }
  bool all_paused(bool paused) {
    return std::all_of(replicas.begin(), replicas.end(),
                       [&](const auto& r) { return r->entries().front().paused == paused; });
  }
  /// The job's line in the controls, if any.
  std::optional<JobControl> control() {
    const ControlsRead read = state->read_controls(h.clock->now());
    for (const JobControl& job : read.jobs) {
      if (job.job_key == "job") return job;
    }
    return std::nullopt;
  }
  std::vector<const Scheduler*> live() {
    std::vector<const Scheduler*> out;
    for (const auto& replica : replicas) out.push_back(replica.get());
    return out;
  }

  Harness& h;
  std::shared_ptr<FleetState> state;
  std::shared_ptr<MemoryClaimer> claimer;
  std::atomic<bool> failing{true}, hold{false};
  std::atomic<int> runs{0};
  OverlapPolicy overlap = OverlapPolicy::allow;
  bool registry = true;  // off: overlap is this replica's alone
  EntryScope scope = EntryScope::fleet;
  std::vector<std::unique_ptr<Scheduler>> replicas;  // last: destroyed (stopped) first
};

/// Releases a held job however the test ends.
struct ReleaseHold {
  std::atomic<bool>& hold;
  ~ReleaseHold() { hold = false; }
};

TEST(SchedulerControls, AFailedRunPausesItsJobFleetWideUntilTheFleetResumesIt) {
  Harness h;
  FailingFleet fleet(h, std::make_shared<MemoryFleetState>(h.clock));
  fleet.add_replica();
  fleet.add_replica();
  fleet.hold = true;
  h.advance(60s, 1, [&] { return fleet.runs.load() == 1; });  // 0:01: one replica runs it
  // Every other thread waits on the clock again: the controls' threads
  // polled at 0:01 already, and their next poll is a second away.
  h.settle(8);
  fleet.hold = false;  // it fails
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
  const auto completed = h.log->all<JobCompletedEvent>();
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed.front().status, RunStatus::failed);
  EXPECT_TRUE(completed.front().paused) << "the event does not say the failure paused the job";
  // The replica that ran it wrote the pause at once (its controls' thread,
  // woken: no clock step); the other applies it at its next poll.
  ReleaseHold release{fleet.hold};
  ASSERT_TRUE(Harness::eventually([&] { return fleet.control().has_value(); })) << "no pause written fleet-wide";
  const JobControl control = *fleet.control();
  EXPECT_TRUE(control.paused);
  EXPECT_TRUE(control.changed_by.starts_with("on-failure@replica-")) << control.changed_by;
  h.settle(8);
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] { return fleet.all_paused(true); }));
  // Paused on both: three minutes, no run.
  for (int minute = 0; minute < 3; ++minute) {
    h.settle(8);
    h.clock->advance(60s);
  }
  Harness::settle_runs(fleet.live());
  EXPECT_EQ(fleet.runs.load(), 1);
  // The fleet's resume runs it again, once per fire.
  fleet.failing = false;
  ASSERT_EQ(fleet.state->set_paused("job", false, "operator", h.clock->now()).status, ControlChange::Status::changed);
  h.settle(8);
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] { return fleet.all_paused(false); }));
  h.settle(8);
  h.advance(60s, 1, [&] { return h.completed() == 2; });
  for (auto& replica : fleet.replicas) EXPECT_TRUE(replica->stop(h.soon()));
  EXPECT_EQ(fleet.runs.load(), 2);
  EXPECT_FALSE(h.log->all<JobCompletedEvent>().back().paused);
}

TEST(SchedulerControls, APauseOnFailureTheStoreRefusedIsWrittenOnceItAnswers) {
  Harness h;
  auto state = std::make_shared<RefusingControls>(std::make_shared<MemoryFleetState>(h.clock));
  state->refusing = true;
  FailingFleet fleet(h, state);
  Scheduler& replica = fleet.add_replica();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  // Paused here at once, whatever the store says.
  EXPECT_TRUE(replica.entries().front().paused);
  ASSERT_TRUE(Harness::eventually([&] {
    std::lock_guard guard(h.messages_mutex);
    return std::any_of(h.messages.begin(), h.messages.end(), [](const std::string& m) {
      return m.find("not written fleet-wide") != std::string::npos;
    });
  })) << "the failed write was not logged";
  EXPECT_FALSE(fleet.control().has_value());
  state->refusing = false;
  h.settle(4);
  h.clock->advance(1s);  // the next poll writes it
  ASSERT_TRUE(Harness::eventually([&] { return fleet.control().has_value(); }));
  EXPECT_EQ(fleet.control()->changed_by, "on-failure@replica-0");
  EXPECT_TRUE(replica.stop(h.soon()));
}

TEST(SchedulerControls, WithoutAFleetStateAFailurePausesThisSchedulerAndASuccessDoesNot) {
  Harness h;
  Scheduler s(h.options());
  std::atomic<bool> failing{false};
  EntryOptions entry;
  entry.pause_on_failure = true;
  const EntryId id = s.add("* * * * *", [&](const FireContext&, std::stop_token) {
    if (failing.load()) throw std::runtime_error("exit 1");
  }, entry);
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  Harness::settle_runs(s);
  EXPECT_FALSE(s.entries().front().paused) << "a success paused the job";
  failing = true;
  h.advance(60s, 1, [&] { return h.completed() == 2; });
  EXPECT_TRUE(s.entries().front().paused);
  EXPECT_TRUE(h.log->all<JobCompletedEvent>().back().paused);
  h.settle(Harness::idle_waiters);
  h.clock->advance(120s);
  h.settle(Harness::idle_waiters);
  Harness::settle_runs(s);
  EXPECT_EQ(h.completed(), 2u);
  failing = false;
  s.resume(id);
  h.advance(60s, 1, [&] { return h.completed() == 3; });
  EXPECT_TRUE(s.stop(h.soon()));
}

// A fire that waited for the run (overlap=queue) finds the entry paused
// by that run's failure: cancelled (the claim path's check after the
// wait, claimed or not), not run.
TEST(SchedulerControls, AFireWaitingBehindTheFailedRunIsCancelledNotRun) {
  Harness h;
  FailingFleet fleet(h, std::make_shared<MemoryFleetState>(h.clock));
  fleet.overlap = OverlapPolicy::queue;
  // Unclaimed, and its overlap this replica's alone: no claim or fleet
  // overlap check after the wait would see the pause.
  fleet.scope = EntryScope::replica;
  fleet.registry = false;
  fleet.hold = true;
  const ReleaseHold release{fleet.hold};
  Scheduler& replica = fleet.add_replica();
  h.advance(60s, 1, [&] { return fleet.runs.load() == 1; });  // 0:01 runs, held
  h.settle(4);
  h.clock->advance(60s);  // 0:02 waits behind it
  ASSERT_TRUE(Harness::eventually([&] { return replica.queue_depth().running == 2; }));
  fleet.hold = false;  // 0:01 fails
  ASSERT_TRUE(h.log->wait_count<CancelledFireEvent>(1));
  const auto cancelled = h.log->all<CancelledFireEvent>();
  EXPECT_EQ(cancelled.front().reason, CancelReason::entry_paused);
  EXPECT_TRUE(replica.stop(h.soon()));
  EXPECT_EQ(fleet.runs.load(), 1);
}

}  // namespace
}  // namespace fleetcron::test
