// The scheduler on virtual time: firing, missed fires, lifecycle, retries,
// timeouts, triggers, snapshots, limits.
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

namespace fleetcron::test {
namespace {

Job noop() {
  return [](const FireContext&, std::stop_token) {};
}

// A job that blocks until its stop token is requested or it is released.
struct Gate {
  std::mutex mutex;
  std::condition_variable_any cv;
  bool open = false;
  std::atomic<int> entered{0};
  std::atomic<int> saw_stop{0};

  Job job() {
    return [this](const FireContext&, std::stop_token stop) {
      ++entered;
      std::unique_lock lock(mutex);
      cv.wait(lock, stop, [this] { return open; });
      if (stop.stop_requested()) ++saw_stop;
    };
  }
  void release() {
    std::lock_guard guard(mutex);
    open = true;
    cv.notify_all();
  }
};

TEST(SchedulerOptions, RejectBadValuesNamingOptionAndValue) {
  struct Case {
    std::function<void(SchedulerOptions&)> change;
    const char* message;
  };
  const std::vector<Case> cases{
      {[](auto& o) { o.missed_tolerance = 0s; }, "scheduler option missed_tolerance: 0s must be greater than zero"},
      {[](auto& o) { o.jitter = -1s; }, "scheduler option jitter: -1s must not be negative"},
      {[](auto& o) { o.limits.max_concurrent = 0; }, "scheduler option limits.max_concurrent: 0 is not between 1 and 4096"},
      {[](auto& o) { o.limits.max_queued = 0; }, "scheduler option limits.max_queued: 0 is not between 1 and 10000000"},
      {[](auto& o) { o.limits.max_entries = 0; }, "scheduler option limits.max_entries: 0 is not between 1 and 100000000"},
      {[](auto& o) { o.limits.observer_queue = 0; }, "scheduler option limits.observer_queue: 0 is not between 1 and 1000000"},
      {[](auto& o) { o.observers.push_back(nullptr); }, "scheduler option observers: [0] is null"},
      {[](auto& o) { o.retry = RetryPolicy{.max_retries = -1}; },
       "scheduler option retry.max_retries: -1 is not between 0 and 1000"},
      {[](auto& o) { o.retry = RetryPolicy{.max_retries = 1, .multiplier = 0.5}; },
       "scheduler option retry.multiplier: 0.5 is not between 1 and 1000"},
      {[](auto& o) { o.retry = RetryPolicy{.max_retries = 1, .initial_delay = 2s, .max_delay = 1s}; },
       "scheduler option retry.max_delay: 1s is below retry.initial_delay 2s"},
      {[](auto& o) { o.retry = RetryPolicy{.max_retries = 1, .jitter_fraction = 1.5}; },
       "scheduler option retry.jitter_fraction: 1.5 is not between 0 and 1"},
  };
  for (const auto& c : cases) {
    SchedulerOptions options;
    c.change(options);
    try {
      Scheduler scheduler(options);
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), c.message);
    }
  }
}

TEST(SchedulerEntries, RejectBadEntryOptions) {
  Harness h;
  Scheduler s(h.options());
  EXPECT_THROW(s.add("* * * * *", Job{}), std::invalid_argument);
  EXPECT_THROW(s.add(SchedulePtr{}, noop()), std::invalid_argument);
  EXPECT_THROW(s.add("61 * * * *", noop()), ParseError);
  try {
    s.add("* * * * *", noop(), EntryOptions{.key = "a@b"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "entry option key: \"a@b\" must not contain '@' or control characters");
  }
  EXPECT_THROW(s.add("* * * * *", noop(), EntryOptions{.timeout = -1s}), std::invalid_argument);
  s.add("* * * * *", noop(), EntryOptions{.key = "  nightly  "});
  try {
    s.add("* * * * *", noop(), EntryOptions{.key = "nightly"});  // trimmed: same key
    FAIL();
  } catch (const SchedulerError& e) {
    EXPECT_EQ(e.code(), SchedulerError::Code::duplicate_key);
  }
}

TEST(SchedulerEntries, ClaimerRequiresAKeyAndRefusesProcessAnchoredSchedules) {
  Harness h;
  auto options = h.options();
  options.claimer = std::make_shared<MemoryClaimer>(h.clock);
  Scheduler s(options);
  try {
    s.add("* * * * *", noop());
    FAIL();
  } catch (const SchedulerError& e) {
    EXPECT_EQ(e.code(), SchedulerError::Code::claimer_requires_key);
  }
  s.add("* * * * *", noop(), EntryOptions{.claimer = std::shared_ptr<Claimer>{}});  // opted out: no key needed
  // Three replicas would each run every fire at their own instants (the
  // review ran @every 2s three times per instant): refused, not warned.
  try {
    s.add(every(10s), noop(), EntryOptions{.key = "drifting"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("process-anchored"), std::string::npos) << e.what();
  }
  s.add(aligned_every(10s), noop(), EntryOptions{.key = "aligned"});
  EXPECT_EQ(s.size(), 2u);
}

TEST(SchedulerEntries, EveryCountsFromTheEpochWhenCoordinated) {
  Harness h;  // the virtual clock starts at an instant that is not a multiple of 13 s or 11 s
  auto options = h.options();
  options.claimer = std::make_shared<MemoryClaimer>(h.clock);
  Scheduler s(options);
  const EntryId coordinated = s.add("@every 13s", noop(), EntryOptions{.key = "ev"});
  const EntryId local = s.add("@every 13s", noop(), EntryOptions{.claimer = std::shared_ptr<Claimer>{}});
  const auto since_epoch = [](Instant t) { return t.time_since_epoch(); };
  ASSERT_TRUE(s.entry(coordinated)->next);
  EXPECT_EQ(since_epoch(*s.entry(coordinated)->next) % 13s, 0s);
  EXPECT_EQ(*s.entry(local)->next, h.clock->now() + 13s);  // one process: from now, as robfig/cron
  s.update(coordinated, "@every 11s");
  EXPECT_EQ(since_epoch(*s.entry(coordinated)->next) % 11s, 0s);
  EXPECT_THROW(s.update(coordinated, every(5s)), std::invalid_argument);
}

TEST(SchedulerEntries, CheckRefusesWhatAddWouldWithoutAdding) {
  Harness h;
  auto options = h.options();
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  Scheduler s(options);
  EXPECT_NO_THROW(s.check("* * * * *", EntryOptions{.key = "a", .jitter = 9min}));
  EXPECT_THROW(s.check("* * * * *", EntryOptions{.key = "a", .jitter = 10min}), std::invalid_argument);
  EXPECT_THROW(s.check("* * * * *", EntryOptions{}), SchedulerError);
  EXPECT_THROW(s.check("61 * * * *", EntryOptions{.key = "a"}), ParseError);
  EXPECT_THROW(s.check(every(1s), EntryOptions{.key = "a"}), std::invalid_argument);
  EXPECT_EQ(s.size(), 0u);
}

TEST(SchedulerEntries, CapacityAndStableIds) {
  Harness h;
  auto options = h.options();
  options.limits.max_entries = 2;
  Scheduler s(options);
  const auto a = s.add("* * * * *", noop());
  const auto b = s.add("* * * * *", noop());
  EXPECT_THROW(s.add("* * * * *", noop()), SchedulerError);
  s.remove(a);
  const auto c = s.add("* * * * *", noop());
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);  // never reused
  EXPECT_THROW(s.remove(a), SchedulerError);
}

TEST(Scheduler, FiresOnTheScheduleWithItsOwnInstantAndKey) {
  Harness h;
  std::mutex mutex;
  std::vector<FireContext> seen;
  Scheduler s(h.options());
  s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
    std::lock_guard guard(mutex);
    seen.push_back(c);
  }, EntryOptions{.name = "report", .key = "hourly-report"});
  s.start();
  h.advance(59s);
  EXPECT_EQ(h.completed(), 0u);
  h.advance(31s, 1, [&] { return h.completed() == 1; });  // wakes 30 s late: within tolerance
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].scheduled_at, at("2026-01-01T00:01:00Z"));
  EXPECT_EQ(seen[0].fire_key, "hourly-report@2026-01-01T00:01:00Z");
  EXPECT_EQ(seen[0].entry->name, "report");
  EXPECT_EQ(seen[0].attempt, 1);
  EXPECT_FALSE(seen[0].manual);
  EXPECT_EQ(seen[0].fence, 0u);
  EXPECT_TRUE(s.stop(h.soon()));
  // add() and each committed fire announce the next instant; queue depth follows each enqueue.
  const auto scheduled = h.log->all<ScheduledEvent>();
  ASSERT_GE(scheduled.size(), 2u);
  EXPECT_EQ(scheduled[0].next, at("2026-01-01T00:01:00Z"));
  EXPECT_EQ(scheduled[1].next, at("2026-01-01T00:02:00Z"));
  EXPECT_GE(h.log->count<QueueDepthEvent>(), 1u);
  EXPECT_EQ(h.log->all<JobStartedEvent>().size(), 1u);
}

TEST(Scheduler, NothingFiresBeforeStart) {
  Harness h;
  Scheduler s(h.options());
  s.add("* * * * *", noop());
  h.clock->advance(1h);
  EXPECT_EQ(h.completed(), 0u);
  EXPECT_THROW(s.trigger(1), SchedulerError);
}

TEST(SchedulerMissed, ThirtyHourOutageRunOnceRunsOnceAtTheMostRecentInstant) {
  Harness h;
  Scheduler s(h.options());
  s.add("0 * * * *", noop(), EntryOptions{.key = "hourly"});
  s.start();
  h.advance(30h, 1, [&] { return h.completed() == 1; });
  const auto runs = h.log->all<JobCompletedEvent>();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].scheduled_at, at("2026-01-02T06:00:00Z"));
  const auto missed = h.log->all<MissedFireEvent>();
  ASSERT_EQ(missed.size(), 1u);
  EXPECT_EQ(missed[0].missed, 30u);
  EXPECT_FALSE(missed[0].missed_is_lower_bound);
  EXPECT_EQ(missed[0].runs, 1u);
  EXPECT_EQ(missed[0].first_missed, at("2026-01-01T01:00:00Z"));
  EXPECT_EQ(missed[0].last_missed, at("2026-01-02T06:00:00Z"));
  EXPECT_EQ(s.entry(1)->next, at("2026-01-02T07:00:00Z"));
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(h.completed(), 1u);
}

TEST(SchedulerMissed, RunAllReplaysTheNewestThousandOldestFirst) {
  Harness h;
  auto options = h.options();
  options.seconds_field = true;
  options.missed_fire = MissedFirePolicy::run_all;
  options.limits.max_concurrent = 1;  // one worker: start order is dispatch order
  Scheduler s(options);
  s.add("* * * * * *", noop(), EntryOptions{.key = "tick"});
  s.start();
  h.advance(30h, 1, [&] { return h.completed() == 1000; });  // 108,000 one-second fires missed
  EXPECT_TRUE(s.stop(h.soon()));
  const auto runs = h.log->all<JobCompletedEvent>();
  ASSERT_EQ(runs.size(), 1000u);
  std::set<Instant> instants;
  for (const auto& run : runs) instants.insert(run.scheduled_at);
  EXPECT_EQ(instants.size(), 1000u);
  EXPECT_EQ(*instants.begin(), at("2026-01-02T05:43:21Z"));
  EXPECT_EQ(*instants.rbegin(), at("2026-01-02T06:00:00Z"));
  // Dispatched oldest first.
  const auto started = h.log->all<JobStartedEvent>();
  EXPECT_EQ(started.front().scheduled_at, *instants.begin());
  for (std::size_t i = 1; i < started.size(); ++i) ASSERT_LT(started[i - 1].scheduled_at, started[i].scheduled_at);
  const auto missed = h.log->all<MissedFireEvent>();
  ASSERT_EQ(missed.size(), 1u);
  EXPECT_EQ(missed[0].missed, 1000u);  // counted up to 1,000 on the loop thread, then a lower bound
  EXPECT_TRUE(missed[0].missed_is_lower_bound);
  EXPECT_EQ(missed[0].last_missed, at("2026-01-02T06:00:00Z"));
  EXPECT_EQ(missed[0].runs, 1000u);
}

TEST(SchedulerMissed, SkipRunsNothingAndContinuesAfterNow) {
  Harness h;
  auto options = h.options();
  options.missed_fire = MissedFirePolicy::skip;
  Scheduler s(options);
  s.add("0 * * * *", noop());
  s.start();
  h.advance(3h + 30min);
  ASSERT_TRUE(h.log->wait_count<MissedFireEvent>(1));
  EXPECT_EQ(s.entry(1)->next, at("2026-01-01T04:00:00Z"));
  h.advance(30min, 1, [&] { return h.completed() == 1; });
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].scheduled_at, at("2026-01-01T04:00:00Z"));
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerMissed, LastRunSeedCatchesUpAfterARestart) {
  Harness h;
  auto options = h.options();
  options.missed_fire = MissedFirePolicy::run_all;
  Scheduler s(options);
  s.add("0 * * * *", noop(), EntryOptions{.key = "k", .last_run = at("2025-12-31T20:59:00Z")});
  s.start();
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(3));
  std::set<std::string> keys;
  for (const auto& run : h.log->all<JobCompletedEvent>()) keys.insert(run.fire_key);
  // 00:00 is due at the moment of the restart, so it is caught up too.
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(4));
  keys.clear();
  for (const auto& run : h.log->all<JobCompletedEvent>()) keys.insert(run.fire_key);
  EXPECT_EQ(keys, (std::set<std::string>{"k@2025-12-31T21:00:00Z", "k@2025-12-31T22:00:00Z", "k@2025-12-31T23:00:00Z",
                                         "k@2026-01-01T00:00:00Z"}));
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(s.entry(1)->prev, at("2026-01-01T00:00:00Z"));
}

TEST(SchedulerClock, WallJumpForwardDoesNotReplayAStorm) {
  Harness h;
  Scheduler s(h.options());
  s.add("* * * * *", noop());
  s.start();
  h.clock->jump_wall(24h);  // NTP step: 1,440 instants passed on the wall clock
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
  ASSERT_TRUE(h.log->wait_count<MissedFireEvent>(1));
  EXPECT_EQ(h.log->all<MissedFireEvent>()[0].missed, 1000u);  // 1,440 missed; counted up to 1,000
  EXPECT_TRUE(h.log->all<MissedFireEvent>()[0].missed_is_lower_bound);
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].scheduled_at, at("2026-01-02T00:00:00Z"));
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(h.completed(), 1u);
}

TEST(SchedulerClock, WallJumpBackwardDoesNotRepeatFires) {
  Harness h;
  Scheduler s(h.options());
  s.add("* * * * *", noop());
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });  // 00:01 ran
  h.clock->jump_wall(-10min);                             // wall back to 23:51
  h.advance(60s, 10);                                     // wall 00:01 again: nothing new
  EXPECT_EQ(h.completed(), 1u);
  h.advance(60s, 1, [&] { return h.completed() == 2; });  // wall 00:02
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[1].scheduled_at, at("2026-01-01T00:02:00Z"));
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLifecycle, PauseAndResumeFromNowWithoutReplay) {
  Harness h;
  Scheduler s(h.options());
  const auto id = s.add("* * * * *", noop());
  s.start();
  s.pause(id);
  s.pause(id);  // idempotent
  EXPECT_TRUE(s.entry(id)->paused);
  EXPECT_EQ(s.entry(id)->next, std::nullopt);
  h.advance(5min);
  s.resume(id);
  EXPECT_EQ(s.entry(id)->next, at("2026-01-01T00:06:00Z"));
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(h.completed(), 1u);
  EXPECT_TRUE(h.log->all<MissedFireEvent>().empty());
}

TEST(SchedulerLifecycle, UpdateKeepsIdAndPreviousFire) {
  Harness h;
  Scheduler s(h.options());
  const auto id = s.add("* * * * *", noop());
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  ASSERT_TRUE(Harness::eventually([&] { return s.entry(id)->prev.has_value(); }));
  s.update(id, "0 * * * *");
  const auto snapshot = s.entry(id);
  EXPECT_EQ(snapshot->prev, at("2026-01-01T00:01:00Z"));
  EXPECT_EQ(snapshot->next, at("2026-01-01T01:00:00Z"));
  EXPECT_EQ(snapshot->spec, "0 * * * *");
  h.advance(5min);  // the old schedule's stale heap item must not fire
  EXPECT_EQ(h.completed(), 1u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLifecycle, RemoveWhileRunningRequestsStop) {
  Harness h;
  Gate gate;  // outlives the scheduler, whose destructor waits for the job
  Scheduler s(h.options());
  const auto id = s.add("* * * * *", gate.job());
  s.start();
  h.advance(60s, 1, [&] { return gate.entered == 1; });
  s.remove(id);
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
  EXPECT_EQ(gate.saw_stop, 1);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLifecycle, StopSignalsRunningJobsAndCannotRestart) {
  Harness h;
  Gate gate;  // outlives the scheduler, whose destructor waits for the job
  Scheduler s(h.options());
  s.add("* * * * *", gate.job());
  s.start();
  s.start();  // idempotent while running
  h.advance(60s, 1, [&] { return gate.entered == 1; });
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(gate.saw_stop, 1);
  // It returned normally, but only because stop was requested (review fix).
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].status, RunStatus::cancelled);
  EXPECT_THROW(s.start(), SchedulerError);
  EXPECT_THROW(s.add("* * * * *", noop()), SchedulerError);
}

TEST(SchedulerLifecycle, StopReturnsFalseWhenAJobIgnoresItsTokenPastTheDeadline) {
  Harness h;
  std::atomic<bool> release{false};  // declared first: the scheduler's destructor waits for the job using them
  std::atomic<bool> entered{false};
  Scheduler s(h.options());
  s.add("* * * * *", [&](const FireContext&, std::stop_token) {
    entered = true;
    while (!release) std::this_thread::yield();
  });
  s.start();
  h.advance(60s, 1, [&] { return entered.load(); });
  const auto deadline = h.clock->steady_now() + 5s;  // fixed before the clock can move
  std::thread advancer([&] { h.clock->advance(5s); });
  EXPECT_FALSE(s.stop(deadline));
  advancer.join();
  release = true;  // the destructor then waits for it
}

// Review fixes: stop() twice at once, stop() from inside a job.
TEST(SchedulerLifecycle, ConcurrentStopsAndStopFromAJob) {
  Harness h;
  std::atomic<int> stop_from_job{-1};
  std::unique_ptr<Scheduler> s;
  s = std::make_unique<Scheduler>(h.options());
  s->add("* * * * *", [&](const FireContext&, std::stop_token) {
    // It does not wait for its own run (that would deadlock); no other run
    // is going, so it reports everything else finished.
    stop_from_job = s->stop(h.clock->steady_now()) ? 1 : 0;
  });
  s->start();
  h.advance(60s, 1, [&] { return stop_from_job.load() >= 0; });
  EXPECT_EQ(stop_from_job, 1);
  std::atomic<int> stopped{0};
  std::thread other([&] { stopped += s->stop(h.soon()) ? 1 : 0; });
  stopped += s->stop(h.soon()) ? 1 : 0;
  other.join();
  EXPECT_EQ(stopped, 2);
  s.reset();
}

// Review finding (the stop flags folded into one state): a stop() that
// reached the runs after another stopper's join had told the watchdog to
// leave set the state back, so that join never returned.
TEST(SchedulerLifecycle, AStopAndADrainAtOnceBothReturn) {
  for (int round = 0; round < 30; ++round) {
    Harness h;
    Gate gate;
    auto s = std::make_unique<Scheduler>(h.options());
    const auto id = s->add("@yearly", gate.job());
    s->start();
    s->trigger(id);
    ASSERT_TRUE(Harness::eventually([&] { return gate.entered == 1; }));
    auto returned = std::make_shared<std::atomic<int>>(0);
    Scheduler* raw = s.get();
    std::thread drainer([raw, returned, deadline = h.soon()] {
      (void)raw->drain(deadline);
      ++*returned;
    });
    std::thread stopper([raw, returned, deadline = h.soon()] {
      (void)raw->stop(deadline);
      ++*returned;
    });
    const bool both = Harness::eventually([&] { return returned->load() == 2; });
    if (!both) {  // hung: leave them, the assertion fails
      drainer.detach();
      stopper.detach();
      (void)s.release();
    }
    ASSERT_TRUE(both) << "round " << round << ": " << returned->load() << " of 2 stoppers returned";
    drainer.join();
    stopper.join();
  }
}

TEST(SchedulerLifecycle, PausedEntriesQueuedFiresAreCancelled) {
  Harness h;
  auto options = h.options();
  options.limits.max_concurrent = 1;
  Gate gate;
  Scheduler s(options);
  s.add("* * * * *", gate.job());
  const auto paused = s.add("* * * * *", noop());
  s.start();
  h.advance(60s, 1, [&] { return gate.entered == 1; });  // the only worker is busy; the other fire waits
  s.pause(paused);
  gate.release();
  ASSERT_TRUE(h.log->wait_count<CancelledFireEvent>(1));
  EXPECT_EQ(h.log->all<CancelledFireEvent>()[0].cause, "entry paused");
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLifecycle, AThrowingLoggerIsContained) {
  Harness h;
  auto options = h.options();
  options.logger = [](LogLevel, std::string_view) { throw std::runtime_error("log sink down"); };
  options.observers = {std::make_shared<EventLog>()};
  Scheduler s(options);
  s.add("* * * * *", [](const FireContext&, std::stop_token) { throw std::runtime_error("job failed"); });
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });  // the failure is logged: the logger throws
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].status, RunStatus::failed);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerLifecycle, DrainLetsRunningJobsFinish) {
  Harness h;
  Gate gate;  // outlives the scheduler, whose destructor waits for the job
  Scheduler s(h.options());
  s.add("* * * * *", gate.job());
  s.start();
  h.advance(60s, 1, [&] { return gate.entered == 1; });
  std::thread releaser([&] {
    // Either order is fine: released before drain waits, or while it waits.
    (void)Harness::eventually([&] { return h.clock->waiter_count() >= Harness::idle_waiters; }, 1000ms);
    gate.release();
  });
  EXPECT_TRUE(s.drain(h.soon()));
  releaser.join();
  EXPECT_EQ(gate.saw_stop, 0);
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].status, RunStatus::succeeded);
  EXPECT_THROW(s.start(), SchedulerError);
}

TEST(SchedulerLifecycle, StopDuringJitterCancelsTheFire) {
  Harness h;
  auto options = h.options();
  options.jitter = 1h;
  Scheduler s(options);
  s.add("* * * * *", noop());
  s.start();
  h.advance(60s);
  h.settle(Harness::idle_waiters + 1);  // + the jitter sleep
  EXPECT_TRUE(s.stop(h.soon()));
  const auto cancelled = h.log->all<CancelledFireEvent>();
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0].cause, "stopped during jitter");
  EXPECT_EQ(cancelled[0].reason, CancelReason::stopped_before_start);
  EXPECT_FALSE(cancelled[0].claimed);  // jitter comes before the claim
  EXPECT_EQ(h.completed(), 0u);
}

/// Grants every claim, but holds each until released; tells when one came.
struct GatedClaimer final : Claimer {
  std::mutex mutex;
  std::condition_variable cv;
  bool entered = false, release = false;
  ClaimResult claim(std::string_view) override {
    std::unique_lock lock(mutex);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return ClaimResult::claimed(7);
  }
  void wait_entered() {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds{10}, [&] { return entered; }));
  }
  void open() {
    {
      std::lock_guard guard(mutex);
      release = true;
    }
    cv.notify_all();
  }
};

TEST(SchedulerLifecycle, AClaimedFireCancelledBeforeItsJobStartsSaysSo) {
  // A claimed fire that never ran is a loss no other replica makes up for:
  // the event must say it was claimed (the daemon logs and counts it).
  Harness h;
  auto claimer = std::make_shared<GatedClaimer>();
  auto options = h.options();
  options.claimer = claimer;
  Scheduler s(options);
  const EntryId id = s.add("* * * * *", noop(), EntryOptions{.key = "a"});
  s.start();
  h.advance(60s);
  ASSERT_NO_FATAL_FAILURE(claimer->wait_entered());
  s.remove(id);  // its run is asked to stop while the claim is in flight
  claimer->open();
  ASSERT_TRUE(h.log->wait_count<CancelledFireEvent>(1));
  const auto cancelled = h.log->all<CancelledFireEvent>();
  EXPECT_EQ(cancelled[0].cause, "stopped before the job started");
  EXPECT_EQ(cancelled[0].reason, CancelReason::stopped_before_start);
  EXPECT_TRUE(cancelled[0].claimed);
  EXPECT_EQ(h.completed(), 0u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, AThrowingJobIsAFailedRunNotACrash) {
  Harness h;
  Scheduler s(h.options());
  s.add("* * * * *", [](const FireContext&, std::stop_token) { throw std::runtime_error("disk full"); });
  s.start();
  h.advance(60s, 2, [&] { return h.completed() >= 1; });
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(2));
  const auto runs = h.log->all<JobCompletedEvent>();
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_EQ(runs[0].error, "disk full");
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, RetryWithExponentialBackoffOnTheClock) {
  Harness h;
  std::atomic<int> calls{0};
  Scheduler s(h.options());
  const auto id = s.add("@yearly", [&](const FireContext& c, std::stop_token) {
    ++calls;
    if (c.attempt < 3) throw std::runtime_error("attempt " + std::to_string(c.attempt));
  }, EntryOptions{.retry = RetryPolicy{.max_retries = 5, .initial_delay = 1s, .multiplier = 2.0, .max_delay = 1min}});
  s.start();
  s.trigger(id);
  h.settle(Harness::idle_waiters + 1);  // + the backoff sleep
  EXPECT_EQ(calls, 1);
  h.clock->advance(999ms);
  h.settle(Harness::idle_waiters + 1);
  EXPECT_EQ(calls, 1);
  h.advance(1ms, 1, [&] { return calls == 2; });  // first retry after 1 s
  h.settle(Harness::idle_waiters + 1);
  h.clock->advance(1999ms);
  h.settle(Harness::idle_waiters + 1);
  EXPECT_EQ(calls, 2);
  h.advance(1ms, 1, [&] { return h.completed() == 1; });  // second retry after 2 s
  const auto run = h.log->all<JobCompletedEvent>()[0];
  EXPECT_EQ(run.status, RunStatus::succeeded);
  EXPECT_EQ(run.attempts, 3);
  EXPECT_EQ(h.log->count<JobStartedEvent>(), 3u);
  EXPECT_TRUE(s.stop(h.soon()));
}

// A pause stops a scheduled fire's remaining retries: before, a job paused
// because it kept failing went on failing through every retry.
TEST(SchedulerJobs, APauseStopsTheRemainingRetries) {
  Harness h;
  std::atomic<int> calls{0};
  Scheduler s(h.options());
  const auto id = s.add("* * * * *", [&](const FireContext&, std::stop_token) {
    ++calls;
    throw std::runtime_error("down");
  }, EntryOptions{.retry = RetryPolicy{.max_retries = 5, .initial_delay = 1s, .multiplier = 2.0, .max_delay = 1min}});
  s.start();
  h.settle(Harness::idle_waiters);
  h.advance(60s, 1, [&] { return calls == 1; });
  h.settle(Harness::idle_waiters + 1);  // + the backoff sleep
  s.pause(id);
  h.advance(1s, 1, [&] { return h.completed() == 1; });
  const auto run = h.log->all<JobCompletedEvent>()[0];
  EXPECT_EQ(run.status, RunStatus::failed);
  EXPECT_EQ(run.attempts, 1);
  EXPECT_NE(run.error.find("remaining retries were not run: the job was paused"), std::string::npos) << run.error;
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, TimeoutBoundsTheWholeRunIncludingRetries) {
  Harness h;
  Scheduler s(h.options());
  const auto id = s.add("@yearly", [](const FireContext&, std::stop_token) { throw std::runtime_error("flaky"); },
                        EntryOptions{.timeout = 10s,
                                     .retry = RetryPolicy{.max_retries = 100, .initial_delay = 3s, .multiplier = 1.0,
                                                          .max_delay = 3s}});
  s.start();
  s.trigger(id);
  for (int second = 0; second < 12 && h.completed() == 0; ++second) {
    ASSERT_TRUE(Harness::eventually([&] {
      return h.completed() == 1 ||
             (h.clock->due_waiter_count() == 0 && h.clock->waiter_count() >= Harness::idle_waiters + 1);
    }));
    if (h.completed() == 0) h.clock->advance(1s);
  }
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
  const auto run = h.log->all<JobCompletedEvent>()[0];
  EXPECT_EQ(run.status, RunStatus::timed_out);
  EXPECT_EQ(run.attempts, 4);  // at 0, 3, 6 and 9 s; stopped at 10 s while waiting
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, TimeoutRequestsStopOfARunningJob) {
  Harness h;
  Gate gate;  // outlives the scheduler, whose destructor waits for the job
  Scheduler s(h.options());
  s.add("* * * * *", gate.job(), EntryOptions{.timeout = 10s});
  s.start();
  h.advance(60s, 1, [&] { return gate.entered == 1; });
  h.advance(10s, 1, [&] { return h.completed() == 1; });
  EXPECT_EQ(gate.saw_stop, 1);
  // It returned normally, but only because the timeout asked it to.
  EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].status, RunStatus::timed_out);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, AnAttemptTimeoutStopsThatAttemptAndARetryFollows) {
  Harness h;
  Gate gate;  // attempt 1 waits for its stop token; attempt 2 finds the gate open
  Scheduler s(h.options());
  const auto id = s.add("@yearly",
                        [&](const FireContext& fire, std::stop_token stop) {
                          if (fire.attempt == 2) return;
                          gate.job()(fire, stop);
                          throw std::runtime_error("killed");
                        },
                        EntryOptions{.attempt_timeout = 5s,
                                     .retry = RetryPolicy{.max_retries = 1, .initial_delay = 1s, .multiplier = 1.0,
                                                          .max_delay = 1s}});
  s.start();
  s.trigger(id);
  ASSERT_TRUE(Harness::eventually([&] { return gate.entered == 1; }));
  h.settle(Harness::idle_waiters);
  h.advance(5s, 1, [&] { return h.log->count<JobAttemptFailedEvent>() == 1; });
  EXPECT_EQ(gate.saw_stop, 1);  // the attempt's token, not the run's
  const auto failed = h.log->all<JobAttemptFailedEvent>()[0];
  EXPECT_EQ(failed.attempt, 1);
  EXPECT_EQ(failed.status, RunStatus::timed_out);
  EXPECT_EQ(failed.error, "attempt timed out after 5s: killed");
  EXPECT_EQ(failed.retry_in, 1s);
  h.settle(Harness::idle_waiters + 1);  // + the retry delay
  h.advance(1s, 1, [&] { return h.completed() == 1; });
  const auto run = h.log->all<JobCompletedEvent>()[0];
  EXPECT_EQ(run.status, RunStatus::succeeded);
  EXPECT_EQ(run.attempts, 2);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, ARunWhoseLastAttemptTimesOutEndsTimedOut) {
  Harness h;
  Gate gate;
  Scheduler s(h.options());
  const auto id = s.add("@yearly", gate.job(), EntryOptions{.attempt_timeout = 2s});
  s.start();
  s.trigger(id);
  ASSERT_TRUE(Harness::eventually([&] { return gate.entered == 1; }));
  h.settle(Harness::idle_waiters);
  h.advance(2s, 1, [&] { return h.completed() == 1; });
  const auto run = h.log->all<JobCompletedEvent>()[0];
  EXPECT_EQ(run.status, RunStatus::timed_out);
  EXPECT_EQ(run.error, "attempt timed out after 2s");  // it returned normally, when asked to
  EXPECT_EQ(h.log->count<JobAttemptFailedEvent>(), 0u);  // no retry policy: the completion reports it
  EXPECT_THROW(s.add("@yearly", noop(), EntryOptions{.attempt_timeout = -1s}), std::invalid_argument);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerJobs, WithoutLogEventsAnEventIsReportedButNotLoggedToo) {
  for (const bool log_events : {true, false}) {
    Harness h;
    auto options = h.options();
    options.log_events = log_events;
    Scheduler s(options);
    const auto id = s.add("@yearly", [](const FireContext&, std::stop_token) { throw std::runtime_error("boom"); });
    s.start();
    s.trigger(id);
    ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
    EXPECT_EQ(h.log->all<JobCompletedEvent>()[0].error, "boom");
    EXPECT_TRUE(s.stop(h.soon()));
    std::lock_guard guard(h.messages_mutex);
    const bool logged = std::any_of(h.messages.begin(), h.messages.end(),
                                    [](const std::string& m) { return m.find("failed after 1 attempt(s): boom") != std::string::npos; });
    EXPECT_EQ(logged, log_events);
  }
}

TEST(SchedulerJobs, JitterDelaysButKeepsTheInstantAndKey) {
  Harness h;
  auto options = h.options();
  options.jitter = 30s;
  Scheduler s(options);
  s.add("* * * * *", noop(), EntryOptions{.key = "j"});
  s.start();
  h.advance(60s);
  h.settle(Harness::idle_waiters + 1);  // + the jitter sleep
  for (int i = 0; i < 30 && h.completed() == 0; ++i) {
    h.clock->advance(1s);
    ASSERT_TRUE(Harness::eventually([&] {
      return h.completed() == 1 || (h.clock->due_waiter_count() == 0 && h.clock->waiter_count() >= Harness::idle_waiters + 1);
    }));
  }
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
  const auto started = h.log->all<JobStartedEvent>()[0];
  EXPECT_EQ(started.scheduled_at, at("2026-01-01T00:01:00Z"));
  EXPECT_EQ(started.fire_key, "j@2026-01-01T00:01:00Z");
  EXPECT_GE(started.started_at, at("2026-01-01T00:01:00Z"));
  EXPECT_LT(started.started_at, at("2026-01-01T00:01:31Z"));
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerTriggers, TriggerAndWaitReturnsTheOutcome) {
  Harness h;
  Scheduler s(h.options());
  const auto ok = s.add("@yearly", noop(), EntryOptions{.name = "batch"});
  const auto bad = s.add("@yearly", [](const FireContext& c, std::stop_token) {
    if (c.manual) throw std::runtime_error("manual run failed");
  }, EntryOptions{.name = "batch"});
  s.start();
  const auto good = s.trigger_and_wait(ok, 10s);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, RunStatus::succeeded);
  EXPECT_EQ(good->attempts, 1);
  const auto failed = s.trigger_and_wait(bad, 10s);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, RunStatus::failed);
  EXPECT_EQ(failed->error, "manual run failed");
  EXPECT_EQ(s.trigger_by_name("batch"), 2u);
  EXPECT_EQ(s.trigger_by_name("nobody"), 0u);
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(4));
  EXPECT_THROW(s.trigger(999), SchedulerError);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerTriggers, TriggerAndWaitGivesUpAtItsDeadline) {
  Harness h;
  Gate gate;  // outlives the scheduler, whose destructor waits for the job
  Scheduler s(h.options());
  const auto id = s.add("@yearly", gate.job());
  s.start();
  std::thread advancer([&] {
    ASSERT_TRUE(Harness::eventually([&] {
      return gate.entered == 1 && h.clock->waiter_count() >= Harness::idle_waiters + 1;  // + trigger_and_wait
    }));
    h.clock->advance(5s);
  });
  EXPECT_EQ(s.trigger_and_wait(id, 5s), std::nullopt);
  advancer.join();
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(SchedulerSnapshots, EntriesAreOrderedByNextFire) {
  Harness h;
  Scheduler s(h.options());
  const auto hourly = s.add("0 * * * *", noop(), EntryOptions{.name = "hourly", .key = "h"});
  const auto minutely = s.add("* * * * *", noop(), EntryOptions{.name = "minutely"});
  const auto never = s.add(manual(), noop(), EntryOptions{.name = "manual"});
  const auto all = s.entries();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, minutely);
  EXPECT_EQ(all[1].id, hourly);
  EXPECT_EQ(all[2].id, never);
  EXPECT_EQ(all[1].key, "h");
  EXPECT_EQ(all[1].spec, "0 * * * *");
  EXPECT_EQ(all[1].next, at("2026-01-01T01:00:00Z"));
  EXPECT_EQ(all[1].prev, std::nullopt);
  EXPECT_EQ(s.entry(12345), std::nullopt);
}

TEST(SchedulerLimits, AFullQueueRejectsAndReports) {
  Harness h;
  auto options = h.options();
  options.limits.max_concurrent = 1;
  options.limits.max_queued = 1;
  Gate gate;
  Scheduler s(options);
  s.add("* * * * *", gate.job());
  s.add("* * * * *", noop());
  s.add("* * * * *", noop());
  s.start();
  h.advance(60s, 1, [&] { return gate.entered == 1; });
  ASSERT_TRUE(h.log->wait_count<RejectedFireEvent>(1));
  gate.release();
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(h.log->count<RejectedFireEvent>() + h.completed() + h.log->count<CancelledFireEvent>(), 3u);
}

// Fires out of the queue in a claim batch come back to it: they count
// against max_queued, so the queue never holds more than its limit.
TEST(SchedulerLimits, FiresOutForAClaimCountAgainstTheQueueLimit) {
  Harness h;
  auto claimer = std::make_shared<GatedClaimer>();
  auto options = h.options();
  options.claimer = claimer;
  options.limits.max_concurrent = 2;
  options.limits.max_queued = 4;
  Scheduler s(options);
  for (int i = 0; i < 4; ++i) s.add("* * * * *", noop(), EntryOptions{.key = fmt::format("k{}", i)});
  s.start();
  h.settle(Harness::idle_waiters);
  h.clock->advance(60s);  // 0:01: one worker takes k0 with k1 (a worker free for it) and waits on the claim
  ASSERT_NO_FATAL_FAILURE(claimer->wait_entered());
  h.settle(Harness::idle_waiters);
  EXPECT_EQ(s.queue_depth().queued, 3u) << "k2 and k3, and k1 out with k0's claim";
  h.clock->advance(60s);  // 0:02: room for one more
  h.settle(Harness::idle_waiters);
  EXPECT_EQ(h.log->count<RejectedFireEvent>(), 3u);
  EXPECT_EQ(s.queue_depth().queued, 4u);
  claimer->open();
  EXPECT_TRUE(h.log->wait_count<JobCompletedEvent>(5));
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_EQ(h.completed(), 5u);
}

TEST(SchedulerEvents, ObserversGetEventsInOrderAndDropsAreCounted) {
  Harness h;
  struct Slow final : Observer {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    bool entered = false;
    std::vector<std::size_t> kinds;
    void on_event(const Event& e) override {
      std::unique_lock lock(mutex);
      entered = true;
      cv.wait(lock, [this] { return open; });
      kinds.push_back(e.index());
    }
  };
  auto slow = std::make_shared<Slow>();
  auto options = h.options();
  options.observers = {slow};
  options.limits.observer_queue = 2;
  Scheduler s(options);
  // The observer holds the first event before the rest arrive, so the
  // queue of 2 takes two more and every later one is dropped: no event
  // gets in after a drop before the queue has drained.
  s.add("* * * * *", noop());
  ASSERT_TRUE(Harness::eventually([&] {
    std::lock_guard guard(slow->mutex);
    return slow->entered;
  }));
  for (int i = 1; i < 10; ++i) s.add("* * * * *", noop());  // 9 more ScheduledEvents
  ASSERT_TRUE(h.log->wait_count<ObserverDropEvent>(1));
  {
    std::lock_guard guard(slow->mutex);
    slow->open = true;
  }
  slow->cv.notify_all();
  const std::size_t dropped = h.log->all<ObserverDropEvent>().back().dropped;
  EXPECT_EQ(dropped, 7u);  // one held, two queued
  const auto scheduled_index = Event(ScheduledEvent{}).index();
  const auto scheduled = [&] {
    std::lock_guard guard(slow->mutex);
    return static_cast<std::size_t>(std::count(slow->kinds.begin(), slow->kinds.end(), scheduled_index));
  };
  ASSERT_TRUE(Harness::eventually([&] { return scheduled() + dropped == 10; }));
  // Room again: the observers (the daemon's log among them) hear of the
  // gap, with the total, before the next event — not only the recorder.
  s.add("* * * * *", noop());
  EXPECT_TRUE(s.stop(h.soon()));  // flushes the observer queue
  EXPECT_EQ(h.log->all<ObserverDropEvent>().back().dropped, dropped);
  std::lock_guard guard(slow->mutex);
  ASSERT_GE(slow->kinds.size(), 2u);
  EXPECT_EQ(slow->kinds.back(), scheduled_index);
  EXPECT_EQ(slow->kinds[slow->kinds.size() - 2], Event(ObserverDropEvent{}).index());
}

TEST(SchedulerEvents, AThrowingObserverIsLoggedNotFatal) {
  Harness h;
  struct Throwing final : Observer {
    void on_event(const Event&) override { throw std::runtime_error("observer bug"); }
  };
  auto options = h.options();
  options.observers = {std::make_shared<Throwing>()};
  Scheduler s(options);
  s.add("* * * * *", noop());
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  EXPECT_TRUE(s.stop(h.soon()));
  std::lock_guard guard(h.messages_mutex);
  EXPECT_NE(std::find_if(h.messages.begin(), h.messages.end(),
                         [](const std::string& m) { return m.find("observer bug") != std::string::npos; }),
            h.messages.end());
}

TEST(FireKey, MatchesLibtnbCronFormat) {
  EXPECT_EQ(fire_key("hourly-report", at("2026-01-02T15:04:05Z")), "hourly-report@2026-01-02T15:04:05Z");
  EXPECT_EQ(fire_key("k", at("2026-01-02T15:04:05.5Z")), "k@2026-01-02T15:04:05.5Z");
  EXPECT_EQ(fire_key("k", at("2026-01-02T17:04:05+02:00")), "k@2026-01-02T15:04:05Z");  // zone-independent
}

}  // namespace
}  // namespace fleetcron::test
