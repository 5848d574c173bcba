// The run ledger as the scheduler writes it (docs/fleet-state.md): one
// record per fire for the whole fleet, written off the scheduling path.
// Memory stores on a virtual clock; Redis and NATS in tests/e2e/.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "scheduler/harness.h"
#include "support/forwarding_fleet_state.h"

namespace fleetcron::test {
namespace {

// A fleet state whose ledger writes fail while `failing` is set, or block
// while `blocked` is set; the rest forwards.
class ControlledLedger final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override {
    ++calls;
    records += writes.size();
    for (const auto& write : writes) running += write.record.fate == FireFate::running ? 1 : 0;
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return !blocked; });
    }
    if (failing.load()) {
      return std::vector<LedgerWriteResult>(writes.size(),
                                            LedgerWriteResult{LedgerWriteResult::Status::error, "store down"});
    }
    return inner_->record_fires(writes);
  }

  void unblock() {
    {
      std::lock_guard guard(mutex);
      blocked = false;
    }
    cv.notify_all();
  }

  std::atomic<bool> failing{false};
  std::atomic<int> calls{0};
  std::atomic<std::size_t> records{0}, running{0};  // given to record_fires, and of them `running`
  std::mutex mutex;
  std::condition_variable cv;
  bool blocked = false;
};

/// Adds "* * * * *" under key "job", doing nothing.
void add_job(Scheduler& s) {
  EntryOptions entry;
  entry.key = "job";
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, entry);
}

/// The harness's options with `state` as the fleet state (its ledger), and no catch-up.
SchedulerOptions ledger_options(Harness& h, std::shared_ptr<FleetState> state) {
  auto options = h.options();
  options.fleet.state = std::move(state);
  options.fleet.catch_up_reach = 0ns;
  return options;
}

/// Whether the scheduler logged a line containing `needle`.
bool logged(Harness& h, std::string_view needle) {
  std::lock_guard guard(h.messages_mutex);
  return std::any_of(h.messages.begin(), h.messages.end(),
                     [&](const std::string& m) { return m.find(needle) != std::string::npos; });
}

/// Releases the job however the test ends, so that the scheduler can stop.
struct ReleaseOnExit {
  std::atomic<bool>& flag;
  ~ReleaseOnExit() { flag = true; }
};

TEST(SchedulerLedger, ARunIsRecordedRunningThenWithItsOutcomeAndDetails) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto options = h.options();
  options.fleet.state = state;
  options.fleet.replica_id = "replica-1";
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  std::atomic<bool> release{false}, started{false};
  Scheduler s(options);
  const ReleaseOnExit release_on_exit{release};  // a failed assertion must not leave the job spinning
  EntryOptions entry;
  entry.key = "job";
  s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
    ASSERT_NE(c.details, nullptr);
    c.details->exit_status = 3;
    c.details->output_tail = "last line\n";
    started = true;
    while (!release.load()) std::this_thread::yield();
    throw std::runtime_error("exit status 3");
  }, entry);
  s.start();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return started.load(); }));
  // Its running record waits until the registry lists the run (within a
  // second of its start, or at the next heartbeat when the announcement
  // that listed it read the runs just before the record was queued), so
  // that a runner killed first leaves none.
  const auto running_written = [&] {
    const auto ledger = ledger_of(*state, "job");
    return ledger.size() == 1 && ledger[0].fate == FireFate::running;
  };
  for (int second = 0; second < 10 && !Harness::eventually(running_written, 500ms); ++second) h.clock->advance(1s);
  ASSERT_TRUE(running_written());
  const RegistryRead registry = state->read_replicas(h.clock->now());
  ASSERT_EQ(registry.replicas.size(), 1u);
  ASSERT_EQ(registry.replicas[0].replica.runs.size(), 1u) << "listed before its running record was written";
  EXPECT_EQ(registry.replicas[0].replica.runs[0].fire_key, "job@2026-01-01T00:01:00Z");
  const FireRecord running = ledger_of(*state, "job").front();
  EXPECT_EQ(running.fire_key, "job@2026-01-01T00:01:00Z");
  EXPECT_EQ(running.replica_id, "replica-1");
  EXPECT_NE(running.fence, 0u);
  EXPECT_EQ(running.attempts, 1);
  EXPECT_TRUE(running.started_at);
  release = true;
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) { return r.size() == 1 && r[0].fate == FireFate::failed; }));
  const FireRecord done = ledger_of(*state, "job").front();
  EXPECT_EQ(done.fence, running.fence);
  EXPECT_EQ(done.exit_status, 3);
  EXPECT_EQ(done.output_tail, "last line\n");
  EXPECT_EQ(done.error, "exit status 3");
  EXPECT_EQ(done.started_at, running.started_at);
  EXPECT_TRUE(done.finished_at);
  EXPECT_TRUE(s.stop(h.soon()));
}

// A run that ends within LedgerWriter::running_record_delay of its start
// (on the scheduler's clock) writes its outcome alone: one write, not two.
TEST(SchedulerLedger, ARunShorterThanTheRunningRecordDelayWritesItsOutcomeAlone) {
  Harness h;
  auto state = std::make_shared<ControlledLedger>(std::make_shared<MemoryFleetState>(h.clock));
  auto options = ledger_options(h, state);
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  options.fleet.registry = false;  // the delay alone holds the record, not a listing
  std::atomic<int> ran{0};
  Scheduler s(options);
  EntryOptions entry;
  entry.key = "job";
  s.add("* * * * *", [&](const FireContext&, std::stop_token) { ++ran; }, entry);
  s.start();
  for (int minute = 1; minute <= 3; ++minute) {
    h.clock->advance(60s);  // the virtual clock stands still while each run goes
    ASSERT_TRUE(ledger_reaches(*state, "job", [&](const auto& r) {
      return r.size() == static_cast<std::size_t>(minute) && r[0].fate == FireFate::succeeded;
    }));
  }
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(state->running.load(), 0u) << "a running record was written for a run that had ended";
  EXPECT_EQ(state->records.load(), 3u);
  EXPECT_TRUE(s.stop(h.soon()));
}

// Records of runs that end close together share one call to the store:
// the writer lets them gather for fleet.ledger_gather_window.
TEST(SchedulerLedger, RecordsQueuedWithinTheGatherWindowShareOneCall) {
  Harness h;
  auto state = std::make_shared<ControlledLedger>(std::make_shared<MemoryFleetState>(h.clock));
  auto options = ledger_options(h, state);
  options.fleet.ledger_gather_window = 1s;  // the machine's time: the test's steps take far less
  Scheduler s(options);
  s.add("1 * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "a"});
  s.add("2 * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "b"});
  s.start();
  // a's record is queued when a completes; a writer that did not gather
  // would write it alone while the test moves on to b.
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  h.advance(60s, 1, [&] { return h.completed() == 2; });
  EXPECT_TRUE(s.stop(h.soon()));  // writes what is queued: both records
  EXPECT_EQ(state->records.load(), 2u);
  EXPECT_EQ(state->calls.load(), 1) << "the two runs' records were written in separate calls";
  EXPECT_EQ(ledger_of(*state, "a").size(), 1u);
  EXPECT_EQ(ledger_of(*state, "b").size(), 1u);
}

TEST(SchedulerLedger, OneRecordPerFireAcrossTheFleetAndNoRoutineSkips) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  std::vector<std::unique_ptr<Scheduler>> fleet;
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) {
    auto options = h.options();
    options.fleet.state = state;
    options.claimer = claimer;
    options.fleet.replica_id = "replica-" + std::to_string(i);
    fleet.push_back(std::make_unique<Scheduler>(options));
    EntryOptions entry;
    entry.key = "job";
    fleet.back()->add("* * * * *", [&](const FireContext&, std::stop_token) { ++ran; }, entry);
    fleet.back()->start();
  }
  for (int minute = 1; minute <= 5; ++minute) {
    h.clock->advance(60s);
    // The winner ran it and both losers decided it before the next minute.
    ASSERT_TRUE(Harness::eventually([&] {
      return ran.load() == minute && h.log->count<SkippedFireEvent>() == static_cast<std::size_t>(2 * minute);
    }));
  }
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) {
    return r.size() == 5 && std::all_of(r.begin(), r.end(), [](const FireRecord& f) { return f.fate == FireFate::succeeded; });
  }));
  // Their already-claimed skips were never written: the ledger holds the
  // five runs alone.
  for (auto& s : fleet) EXPECT_TRUE(s->stop(h.soon()));
  EXPECT_EQ(h.log->all<SkippedFireEvent>().size(), 10u);
  EXPECT_EQ(ledger_of(*state, "job").size(), 5u);
}

TEST(SchedulerLedger, AClaimErrorIsRecordedAsASkipWithItsError) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  struct Failing final : Claimer {
    ClaimResult claim(std::string_view) override { return ClaimResult::failed("redis down"); }
  };
  auto options = h.options();
  options.fleet.state = state;
  options.claimer = std::make_shared<Failing>();
  Scheduler s(options);
  add_job(s);
  s.start();
  h.clock->advance(60s);
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) { return r.size() == 1; }));
  const FireRecord skip = ledger_of(*state, "job").front();
  EXPECT_EQ(skip.fate, FireFate::skipped);
  EXPECT_EQ(skip.reason, "claim-error");
  EXPECT_NE(skip.error.find("redis down"), std::string::npos) << skip.error;
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLedger, MissedFiresOfOneProcessAreOneRecordBesideTheRun) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto options = h.options();
  options.fleet.state = state;
  options.fleet.catch_up_reach = 0ns;  // this test is about the loop's own missed fires
  Scheduler s(options);
  add_job(s);
  s.start();
  h.clock->advance(10min);  // one jump: nine instants missed, the newest runs
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) {
    return r.size() == 2 && r[0].fate == FireFate::succeeded;  // the run's running record is replaced
  }));
  const auto records = ledger_of(*state, "job");
  EXPECT_EQ(records[0].fate, FireFate::succeeded);
  EXPECT_EQ(records[0].scheduled_at, at("2026-01-01T00:10:00Z"));
  EXPECT_EQ(records[1].fate, FireFate::missed);
  EXPECT_EQ(records[1].fire_key, "job@2026-01-01T00:01:00Z#missed");
  EXPECT_EQ(records[1].missed_count, 10u);
  EXPECT_EQ(records[1].last_missed, at("2026-01-01T00:10:00Z"));
  EXPECT_EQ(records[1].reason, "run-once: 1 of 10 queued");
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLedger, AClaimedJobsLateLoopRecordsEachInstantBelowOtherReplicas) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto options = h.options();
  options.fleet.state = state;
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  options.fleet.replica_id = "late";
  options.fleet.catch_up_reach = 0ns;  // this test is about the loop's own missed fires
  Scheduler s(options);
  add_job(s);
  s.start();
  h.clock->advance(10min);  // one jump: ten instants missed, the newest runs
  // Another replica may have run any of them: no range record, one record
  // per instant, and the run of the newest replaces its missed record.
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) {
    return r.size() == 10 && r[0].fate == FireFate::succeeded;
  }));
  const auto records = ledger_of(*state, "job");
  EXPECT_EQ(records[0].scheduled_at, at("2026-01-01T00:10:00Z"));
  for (std::size_t i = 1; i < records.size(); ++i) {
    EXPECT_EQ(records[i].fate, FireFate::missed) << i;
    EXPECT_EQ(records[i].fire_key, fire_key("job", records[i].scheduled_at)) << records[i].fire_key;
    EXPECT_EQ(records[i].replica_id, "late");
    EXPECT_EQ(records[i].reason, "run-once: 1 of 10 queued (this replica's loop was late)");
    EXPECT_NE(records[i].error.find("late"), std::string::npos) << records[i].error;
    EXPECT_EQ(ledger_rank(records[i]), 0);
  }
  EXPECT_EQ(records[9].scheduled_at, at("2026-01-01T00:01:00Z"));
  // What another replica did of one of those fires replaces the record.
  FireRecord run = records[5];
  run.fate = FireFate::succeeded;
  run.replica_id = "punctual";
  run.reason.clear();
  run.error.clear();
  const LedgerWrite write{run, LedgerRetention{}};
  const auto results = state->record_fires(std::span(&write, 1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, LedgerWriteResult::Status::written) << results[0].error;
  const auto after = ledger_of(*state, "job");
  ASSERT_EQ(after.size(), 10u);
  EXPECT_EQ(after[5].replica_id, "punctual");
  EXPECT_EQ(after[5].fate, FireFate::succeeded);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLedger, RecordsWaitOutAStoreOutageAndAreWrittenAfter) {
  Harness h;
  auto state = std::make_shared<ControlledLedger>(std::make_shared<MemoryFleetState>(h.clock));
  state->failing = true;
  auto options = ledger_options(h, state);
  Scheduler s(options);
  add_job(s);
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  // Failed (and logged) before the store comes back: a write that began
  // before and read `failing` after would just succeed.
  ASSERT_TRUE(Harness::eventually([&] { return logged(h, "not written yet: store down"); }));
  state->failing = false;
  // The retry waits on the scheduler's clock (loop, watchdog, catch-up,
  // controls and the writer wait on it): 1 s later it writes the records.
  h.settle(Harness::idle_waiters + 3);
  h.clock->advance(1s);
  ASSERT_TRUE(ledger_reaches(*state, "job", [](const auto& r) { return r.size() == 1 && r[0].fate == FireFate::succeeded; }));
  EXPECT_TRUE(s.stop(h.soon()));
}

// A run's running record queued with its outcome is not written: the
// outcome replaces it in the store anyway, so one write leaves the same ledger.
TEST(SchedulerLedger, ARunningRecordQueuedWithItsOutcomeIsNotWritten) {
  Harness h;
  auto state = std::make_shared<ControlledLedger>(std::make_shared<MemoryFleetState>(h.clock));
  state->blocked = true;
  auto options = ledger_options(h, state);
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);  // coordinated: their runs are recorded running
  std::atomic<bool> release{false}, started{false};
  Scheduler s(options);
  const ReleaseOnExit release_on_exit{release};  // a failed assertion must not leave the job spinning
  s.add("1 * * * *", [&](const FireContext&, std::stop_token) {
    started = true;
    while (!release.load()) std::this_thread::yield();
  }, EntryOptions{.key = "a"});
  s.add("2 * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "b"});
  s.start();
  h.clock->advance(60s);  // 0:01: a starts
  ASSERT_TRUE(Harness::eventually([&] { return started.load(); }));
  // The registry lists a's run (at the latest at the next heartbeat): the
  // writer takes its running record into the blocked store.
  for (int second = 0; second < 10 && !Harness::eventually([&] { return state->calls == 1; }, 500ms); ++second) {
    h.clock->advance(1s);
  }
  ASSERT_EQ(state->calls, 1);
  h.advance(60s, 1, [&] { return h.completed() == 1; });  // 0:02: b runs, its two records queue
  release = true;
  ASSERT_TRUE(Harness::eventually([&] { return h.completed() == 2; }));  // a's outcome queues
  state->unblock();
  for (const char* key : {"a", "b"}) {
    ASSERT_TRUE(ledger_reaches(*state, key, [](const auto& r) { return r.size() == 1 && r[0].fate == FireFate::succeeded; }));
  }
  EXPECT_EQ(state->records, 3u);  // of four: b's running record went with its outcome
  EXPECT_EQ(state->running, 1u);  // a's, which the writer held
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLedger, AFullQueueDropsCountsAndLogsNeverBlocksTheScheduler) {
  Harness h;
  auto state = std::make_shared<ControlledLedger>(std::make_shared<MemoryFleetState>(h.clock));
  state->blocked = true;
  auto options = ledger_options(h, state);
  options.limits.ledger_queue = 1;
  Scheduler s(options);
  add_job(s);
  s.start();
  // The writer holds the first record in the blocked store; the queue
  // takes one more; the runs of three minutes still complete.
  for (std::size_t minute = 1; minute <= 3; ++minute) h.advance(60s, 1, [&] { return h.completed() == minute; });
  state->unblock();
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_TRUE(logged(h, "records dropped"));
}

TEST(SchedulerLedger, LedgerOffOrNoKeyWritesNothing) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto options = h.options();
  options.fleet.state = state;
  options.fleet.ledger = false;
  Scheduler s(options);
  add_job(s);
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_TRUE(ledger_of(*state, "job").empty());
  EXPECT_EQ(state->ledgers(), 0u);
}

TEST(SchedulerLedger, AnEntrysOwnRetentionBoundsItsLedger) {
  Harness h;
  auto state = std::make_shared<MemoryFleetState>(h.clock);
  auto options = ledger_options(h, state);
  Scheduler s(options);
  EntryOptions entry;
  entry.key = "job";
  entry.ledger_retention = LedgerRetention{2, std::chrono::hours{24}};  // the only option set
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, entry);
  s.start();
  for (std::size_t minute = 1; minute <= 3; ++minute) h.advance(60s, 1, [&] { return h.completed() == minute; });
  EXPECT_TRUE(s.stop(h.soon()));  // writes what is queued
  const auto records = ledger_of(*state, "job");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].scheduled_at, at("2026-01-01T00:03:00Z"));
}

TEST(SchedulerLedger, RetentionOptionsAreCheckedWithTheirNames) {
  auto options = Harness().options();
  options.fleet.ledger_retention.keep_count = 0;
  try {
    Scheduler s(options);
    FAIL() << "keep_count 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "scheduler.ledger_retention: keep_count 0 is outside 1..10000");
  }
  options = Harness().options();
  options.limits.ledger_queue = 0;
  EXPECT_THROW(Scheduler{options}, std::invalid_argument);
  options = Harness().options();
  options.fleet.ledger_gather_window = 1001ms;
  try {
    Scheduler s(options);
    FAIL() << "a gather window of 1001ms accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "scheduler option fleet.ledger_gather_window: 1.001s is not between 0 and 1s");
  }
  Scheduler s(Harness().options());
  EntryOptions entry;
  entry.key = "job";
  entry.ledger_retention = LedgerRetention{10, 0ns};
  EXPECT_THROW(s.add("* * * * *", [](const FireContext&, std::stop_token) {}, entry), std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron::test
