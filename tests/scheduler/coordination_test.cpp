// Coordination: several schedulers sharing one in-memory claimer and lease;
// failing backends; fencing tokens; leadership loss.
#include <atomic>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "core/scheduler/fire.h"
#include "harness.h"

namespace fleetcron::test {
namespace {

class FailingClaimer final : public Claimer {
 public:
  ClaimResult claim(std::string_view) override { return ClaimResult::failed("connection refused"); }
};
class ThrowingElector final : public Elector {
 public:
  Leadership is_leader() override { throw std::runtime_error("lease store unreachable"); }
};
class Follower final : public Elector {
 public:
  Leadership is_leader() override { return Leadership::follower(); }
};

TEST(MemoryClaimer, ClaimsOncePerTtlWithIncreasingFences) {
  auto clock = std::make_shared<VirtualClock>(at("2026-01-01T00:00:00Z"));
  MemoryClaimer claimer(clock, 10min);
  const auto first = claimer.claim("k@2026-01-01T00:01:00Z");
  EXPECT_EQ(first.status, ClaimResult::Status::claimed);
  EXPECT_EQ(claimer.claim("k@2026-01-01T00:01:00Z").status, ClaimResult::Status::already_claimed);
  const auto second = claimer.claim("k@2026-01-01T00:02:00Z");
  EXPECT_GT(second.fence, first.fence);
  EXPECT_EQ(claimer.claim("  ").status, ClaimResult::Status::error);
  clock->advance(10min);
  EXPECT_EQ(claimer.claim("k@2026-01-01T00:01:00Z").status, ClaimResult::Status::claimed);  // expired
  EXPECT_EQ(claimer.size(), 1u);  // the other two were purged
  EXPECT_THROW(MemoryClaimer(clock, 0ms), std::invalid_argument);
}

TEST(MemoryLease, OneLeaderPerTermAndTermsIncrease) {
  auto clock = std::make_shared<VirtualClock>(at("2026-01-01T00:00:00Z"));
  auto lease = std::make_shared<MemoryLease>(clock, 30s);
  auto a = lease->make_elector();
  auto b = lease->make_elector();
  std::vector<std::uint64_t> a_lost;
  a->on_leadership_lost([&](std::uint64_t term) { a_lost.push_back(term); });
  const auto first = a->is_leader();
  EXPECT_EQ(first.status, Leadership::Status::leader);
  EXPECT_EQ(b->is_leader().status, Leadership::Status::follower);
  clock->advance(29s);
  EXPECT_EQ(a->is_leader().term, first.term);  // renewed
  clock->advance(31s);
  const auto taken = b->is_leader();
  EXPECT_EQ(taken.status, Leadership::Status::leader);
  EXPECT_GT(taken.term, first.term);
  EXPECT_EQ(a_lost, std::vector<std::uint64_t>{first.term});
  EXPECT_EQ(a->is_leader().status, Leadership::Status::follower);
  b->resign();
  EXPECT_EQ(a->is_leader().status, Leadership::Status::leader);
  EXPECT_THROW(MemoryLease(clock, 0ms), std::invalid_argument);
}

// Three replicas, one claimer and one lease: every fire runs exactly once.
TEST(Coordination, ThreeSchedulersRunEachOfTenThousandFiresOnce) {
  auto clock = std::make_shared<VirtualClock>(at("2026-01-01T00:00:00Z"));
  auto claimer = std::make_shared<MemoryClaimer>(clock, 10min);
  auto lease = std::make_shared<MemoryLease>(clock, 30s);  // defence in depth: lease and claim
  auto log = std::make_shared<EventLog>();
  std::mutex mutex;
  std::map<std::string, int> runs;
  std::vector<std::uint64_t> fences;
  std::vector<std::unique_ptr<Scheduler>> fleet;
  for (int replica = 0; replica < 3; ++replica) {
    SchedulerOptions options;
    options.clock = clock;
    options.claimer = claimer;
    options.elector = lease->make_elector();
    options.recorder = log;
    options.seconds_field = true;
    options.limits.max_concurrent = 2;
    options.logger = [](LogLevel, std::string_view) {};
    fleet.push_back(std::make_unique<Scheduler>(options));
    fleet.back()->add("* * * * * *", [&](const FireContext& c, std::stop_token) {
      std::lock_guard guard(mutex);
      ++runs[c.fire_key];
      fences.push_back(c.fence);
    }, EntryOptions{.key = "tick"});
  }
  for (auto& s : fleet) s->start();
  constexpr int fires = 10'000;
  for (int i = 1; i <= fires; ++i) {
    clock->advance(1s);
    // Every replica decides every fire: one completes, two skip.
    ASSERT_TRUE((log->wait_tally<JobCompletedEvent, SkippedFireEvent>(static_cast<std::size_t>(3 * i))))
        << "fire " << i;
  }
  for (auto& s : fleet) EXPECT_TRUE(s->stop(clock->steady_now() + 10s));
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(fires));
  for (const auto& [key, count] : runs) ASSERT_EQ(count, 1) << key;
  for (const auto& skipped : log->all<SkippedFireEvent>()) {
    EXPECT_TRUE(skipped.reason == SkipReason::not_leader || skipped.reason == SkipReason::already_claimed)
        << to_string(skipped.reason);
  }
  std::set<std::uint64_t> unique(fences.begin(), fences.end());
  EXPECT_EQ(unique.size(), fences.size());  // a fence is never handed out twice
}

TEST(Coordination, FailingBackendsSkipWithTheReasonButManualTriggersRun) {
  struct Case {
    std::shared_ptr<Claimer> claimer;
    std::shared_ptr<Elector> elector;
    SkipReason reason;
    const char* error;
  };
  const std::vector<Case> cases{
      {std::make_shared<FailingClaimer>(), nullptr, SkipReason::claim_error, "connection refused"},
      {nullptr, std::make_shared<ThrowingElector>(), SkipReason::election_error, "lease store unreachable"},
      {nullptr, std::make_shared<Follower>(), SkipReason::not_leader, ""},
  };
  for (const auto& c : cases) {
    Harness h;
    auto options = h.options();
    options.claimer = c.claimer;
    options.elector = c.elector;
    Scheduler s(options);
    const auto id = s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "k"});
    s.start();
    h.advance(60s, 1, [&] { return h.log->count<SkippedFireEvent>() == 1; });
    const auto skipped = h.log->all<SkippedFireEvent>()[0];
    EXPECT_EQ(skipped.reason, c.reason);
    EXPECT_EQ(skipped.error, c.error);
    EXPECT_EQ(skipped.fire_key, "k@2026-01-01T00:01:00Z");
    EXPECT_EQ(h.completed(), 0u);
    const auto manual = s.trigger_and_wait(id, 10s);  // "run it here, now"
    ASSERT_TRUE(manual);
    EXPECT_EQ(manual->status, RunStatus::succeeded);
    EXPECT_TRUE(s.stop(h.soon()));
  }
}

TEST(Coordination, AReplicaScopedEntryRunsOnEveryReplicaWhateverTheClaimerAndElectorSay) {
  // A follower whose every claim fails: the fleet's entries are skipped,
  // the replica-scoped one (local cleanup, say) runs each fire here, with
  // no claim and no term; jitter is allowed, as nothing is gated.
  Harness h;
  auto options = h.options();
  options.claimer = std::make_shared<FailingClaimer>();
  options.elector = std::make_shared<Follower>();
  Scheduler s(options);
  std::atomic<int> local{0};
  std::atomic<std::uint64_t> fence{99};
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "fleet"});
  s.add("* * * * *", [&](const FireContext& fire, std::stop_token) {
    fence = fire.fence;
    ++local;
  }, EntryOptions{.key = "local", .scope = EntryScope::replica});
  {  // leader mode alone refuses jitter (a handover inside it could run a fire twice), not for the replica's own
    auto leader_only = h.options();
    leader_only.elector = std::make_shared<Follower>();
    const Scheduler rules(leader_only);
    EXPECT_THROW(rules.check("* * * * *", EntryOptions{.key = "gated", .jitter = 5s}), std::invalid_argument);
    EXPECT_NO_THROW(rules.check("* * * * *", EntryOptions{.key = "spread", .jitter = 5s, .scope = EntryScope::replica}));
  }
  s.start();
  for (int minute = 1; minute <= 3; ++minute) {
    h.advance(60s, 1, [&] { return local.load() == minute && h.log->count<SkippedFireEvent>() == std::size_t(minute); });
  }
  EXPECT_EQ(local.load(), 3);
  EXPECT_EQ(fence.load(), 0u);
  for (const auto& skipped : h.log->all<SkippedFireEvent>()) EXPECT_TRUE(skipped.fire_key.starts_with("fleet@")) << skipped.fire_key;
  EXPECT_TRUE(s.stop(h.soon()));
}

// Records each claim_batch() call; grants even-numbered keys, refuses the
// others as taken, and reports clock skew for keys starting with "skew".
class BatchRecorder final : public Claimer {
 public:
  ClaimResult claim(std::string_view key) override { return decide(key); }
  std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override {
    std::vector<ClaimResult> out;
    std::lock_guard guard(mutex);
    batch_sizes.push_back(keys.size());
    for (const auto& key : keys) out.push_back(decide(key));
    return out;
  }
  ClaimResult decide(std::string_view key) {
    if (key.starts_with("skew")) return ClaimResult::skewed("offset 9s exceeds 5s");
    const int number = std::stoi(std::string(key.substr(1, key.find('@') - 1)));
    if (number % 2 == 1) return ClaimResult::taken();
    return ClaimResult::claimed(static_cast<std::uint64_t>(1000 + number));
  }
  std::mutex mutex;
  std::vector<std::size_t> batch_sizes;
};

// A claimer whose claims are trusted for 150 s after a fire's instant.
class WindowClaimer final : public Claimer {
 public:
  ClaimResult claim(std::string_view key) override {
    std::lock_guard guard(mutex);
    keys.emplace_back(key);
    return ClaimResult::claimed(++fence);
  }
  std::chrono::nanoseconds dedup_window() const override { return 150s; }
  std::mutex mutex;
  std::vector<std::string> keys;
  std::uint64_t fence = 0;
};

// Regression (found by the simulator, tests/sim): a replica replaying fires
// older than the claim TTL claimed them again after the other replicas'
// claims had expired, and ran them twice.
TEST(Coordination, FiresOlderThanTheDedupWindowAreSkippedNotClaimed) {
  Harness h;  // the clock reads 2026-01-01T00:00:00Z
  auto claimer = std::make_shared<WindowClaimer>();
  auto options = h.options();
  options.claimer = claimer;
  Scheduler s(options);
  s.add("* * * * *", [](const FireContext&, std::stop_token) {},
        EntryOptions{.key = "replay", .missed_fire = MissedFirePolicy::run_all, .last_run = at("2025-12-31T23:50:00Z")});
  s.start();
  // run_all replays 23:51 .. 00:00; 23:58 is 120 s old, 23:57 180 s.
  ASSERT_TRUE((h.log->wait_tally<JobCompletedEvent, SkippedFireEvent>(10)));
  std::vector<std::string> stale;
  for (const auto& skipped : h.log->all<SkippedFireEvent>()) {
    EXPECT_EQ(skipped.reason, SkipReason::stale);
    EXPECT_NE(skipped.error.find("beyond the claimer's dedup window of 2m30s"), std::string::npos) << skipped.error;
    stale.push_back(skipped.fire_key);
  }
  EXPECT_EQ(stale.size(), 7u);
  EXPECT_EQ(h.completed(), 3u);
  std::lock_guard guard(claimer->mutex);
  std::sort(claimer->keys.begin(), claimer->keys.end());
  EXPECT_EQ(claimer->keys, (std::vector<std::string>{"replay@2025-12-31T23:58:00Z", "replay@2025-12-31T23:59:00Z",
                                                     "replay@2026-01-01T00:00:00Z"}));
  EXPECT_EQ(to_string(SkipReason::stale), "stale");
}

// A claim answered after the dedup window (a slow store, a pause between
// the age check and the request): the claim may sit beside an expired one,
// so the fire is skipped, never run (review finding: NATS has no skew guard
// to catch it).
class SlowClaimer final : public Claimer {
 public:
  explicit SlowClaimer(std::shared_ptr<VirtualClock> clock) : clock_(std::move(clock)) {}
  ClaimResult claim(std::string_view) override {
    // The first answer arrives 200 s later. Only the first: the jump makes
    // the loop plan later fires, and their claims (on other workers, in any
    // order) must not move the clock again before the first fire's age is
    // taken (that made the age 43m20s on a loaded machine).
    if (!jumped_.exchange(true)) clock_->jump_wall(200s);
    return ClaimResult::claimed(1);
  }
  std::chrono::nanoseconds dedup_window() const override { return 150s; }

 private:
  std::shared_ptr<VirtualClock> clock_;
  std::atomic<bool> jumped_{false};
};

TEST(Coordination, AClaimAnsweredAfterTheDedupWindowIsNotRun) {
  Harness h;
  auto options = h.options();
  options.claimer = std::make_shared<SlowClaimer>(h.clock);
  Scheduler s(options);
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "slow"});
  s.start();
  h.advance(60s);
  // The wall jump makes the loop plan later fires too (their skips may come
  // first on a slow machine): look for this fire's own.
  const std::string key = "slow@2026-01-01T00:01:00Z";
  ASSERT_TRUE(h.log->wait_for([&](const std::vector<Event>& events) {
    return std::any_of(events.begin(), events.end(), [&](const Event& e) {
      const auto* skip = std::get_if<SkippedFireEvent>(&e);
      return skip != nullptr && skip->fire_key == key;
    });
  }));
  SkippedFireEvent skipped;
  for (const auto& event : h.log->all<SkippedFireEvent>()) {
    if (event.fire_key == key) skipped = event;
  }
  EXPECT_EQ(skipped.fire_key, key);
  EXPECT_EQ(skipped.reason, SkipReason::stale);
  EXPECT_EQ(skipped.error.rfind("claimed, but the fire is 3m20s old", 0), 0u) << skipped.error;
  EXPECT_TRUE(s.stop(h.soon()));
  for (const auto& started : h.log->all<JobStartedEvent>()) EXPECT_NE(started.fire_key, skipped.fire_key);
}

TEST(Coordination, JitterAsLongAsTheDedupWindowIsRefusedAtAdd) {
  Harness h;
  auto options = h.options();
  options.claimer = std::make_shared<WindowClaimer>();
  Scheduler s(options);
  try {
    s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "j", .jitter = 150s});
    FAIL() << "accepted a jitter every fire would be stale after";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "add: jitter 2m30s is not below the claimer's dedup window 2m30s: every fire "
                                     "would be too old to claim (stale)");
  }
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "k", .jitter = 10s});
}

TEST(Coordination, FiresDueTogetherAreClaimedInOneBatch) {
  Harness h;
  auto claimer = std::make_shared<BatchRecorder>();
  auto options = h.options();
  options.claimer = claimer;
  options.limits.max_concurrent = 128;  // enough idle workers to start every fire of a batch at once
  Scheduler s(options);
  std::mutex mutex;
  std::map<std::string, std::uint64_t> fences;  // fire key -> fence
  for (int i = 0; i < 100; ++i) {
    s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
      std::lock_guard guard(mutex);
      fences[c.fire_key] = c.fence;
    }, EntryOptions{.key = "k" + std::to_string(i)});
  }
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "skew"});
  s.start();
  h.advance(60s, 1, [&] { return h.completed() + h.log->count<SkippedFireEvent>() == 101; });
  // The loop queues due fires 64 at a time; a worker takes whatever is
  // queued together (typically 64 then 37) — never one by one.
  EXPECT_LE(claimer->batch_sizes.size(), 10u);
  EXPECT_EQ(std::accumulate(claimer->batch_sizes.begin(), claimer->batch_sizes.end(), std::size_t{0}), 101u);
  ASSERT_EQ(fences.size(), 50u);
  for (const auto& [key, fence] : fences) {
    const int number = std::stoi(key.substr(1, key.find('@') - 1));
    EXPECT_EQ(number % 2, 0) << key;
    EXPECT_EQ(fence, 1000u + static_cast<std::uint64_t>(number)) << key;
  }
  std::map<SkipReason, int> reasons;
  for (const auto& skipped : h.log->all<SkippedFireEvent>()) ++reasons[skipped.reason];
  EXPECT_EQ(reasons[SkipReason::already_claimed], 50);
  EXPECT_EQ(reasons[SkipReason::clock_skew], 1);
  EXPECT_EQ(to_string(SkipReason::clock_skew), "clock-skew");
  EXPECT_EQ(reasons[SkipReason::unknown], 0);  // never reported: every skip says why
  EXPECT_TRUE(s.stop(h.soon()));
}

// A default-constructed event claims nothing: its reason is unknown.
TEST(Coordination, AnEventsReasonStartsUnknown) {
  EXPECT_EQ(SkippedFireEvent{}.reason, SkipReason::unknown);
  EXPECT_EQ(CancelledFireEvent{}.reason, CancelReason::unknown);
  EXPECT_EQ(to_string(SkipReason::unknown), "unknown");
  EXPECT_EQ(to_string(CancelReason::unknown), "unknown");
}

TEST(Coordination, ClaimBatchesNeverExceedTheWorkersThatCanStartThem) {
  // Review finding: a batch larger than the idle workers left claimed fires
  // waiting in the queue, where a claim can expire or, if the process
  // stops, leave the fire claimed and run by nobody.
  Harness h;
  auto claimer = std::make_shared<BatchRecorder>();
  auto options = h.options();
  options.claimer = claimer;
  options.limits.max_concurrent = 1;  // the only worker is the one that would batch: no batches
  Scheduler s(options);
  for (int i = 0; i < 20; ++i) {
    s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "k" + std::to_string(i)});
  }
  s.start();
  h.advance(60s, 1, [&] { return h.completed() + h.log->count<SkippedFireEvent>() == 20; });
  EXPECT_TRUE(claimer->batch_sizes.empty());  // every fire claimed when its worker could run it
  EXPECT_EQ(h.completed(), 10u);
  EXPECT_TRUE(s.stop(h.soon()));
}

// The fires queued behind a batch the free workers cut short are looked at
// (in one call, each at most Fire::max_looks times), and those another
// replica claimed meanwhile are dropped, never claimed one by one; the others are claimed as workers
// free up, each only when a worker can start it.
TEST(Coordination, FiresQueuedBehindBusyWorkersAreLookedAtAndDroppedIfClaimedElsewhere) {
  class LookingClaimer final : public Claimer {
   public:
    ClaimResult claim(std::string_view key) override {
      std::lock_guard guard(mutex);
      claimed.emplace_back(key);
      return ClaimResult::claimed(claimed.size());
    }
    std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override {
      std::vector<ClaimResult> out;
      for (const auto& key : keys) out.push_back(claim(key));
      return out;
    }
    std::vector<bool> already_claimed(std::span<const std::string> keys) override {
      std::lock_guard guard(mutex);
      looks.emplace_back(keys.begin(), keys.end());
      std::vector<bool> out;
      for (const auto& key : keys) out.push_back(std::stoi(key.substr(1, key.find('@') - 1)) % 2 == 1);  // odd: elsewhere
      return out;
    }
    bool tells_already_claimed() const override { return true; }
    std::mutex mutex;
    std::vector<std::string> claimed;
    std::vector<std::vector<std::string>> looks;
  };
  Harness h;
  auto claimer = std::make_shared<LookingClaimer>();
  auto options = h.options();
  options.claimer = claimer;
  options.limits.max_concurrent = 1;
  Scheduler s(options);
  std::mutex mutex;
  std::vector<std::string> ran;
  for (int i = 0; i < 20; ++i) {
    s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
      std::lock_guard guard(mutex);
      ran.push_back(c.fire_key);
    }, EntryOptions{.key = "k" + std::to_string(i)});
  }
  s.start();
  h.advance(60s, 1, [&] { return h.completed() + h.log->count<SkippedFireEvent>() == 20; });
  EXPECT_TRUE(s.stop(h.soon()));
  std::vector<std::string> evens;
  for (int i = 0; i < 20; i += 2) evens.push_back("k" + std::to_string(i) + "@2026-01-01T00:01:00Z");
  EXPECT_EQ(claimer->claimed, ran);  // each claimed when it ran, in the order queued
  std::sort(ran.begin(), ran.end());
  std::sort(evens.begin(), evens.end());
  EXPECT_EQ(ran, evens);  // no odd fire claimed
  ASSERT_GE(claimer->looks.size(), 1u);
  std::map<std::string, std::size_t> times;  // fire key → times looked at
  for (const auto& look : claimer->looks) {
    for (const auto& key : look) ++times[key];
  }
  EXPECT_EQ(times.size(), 19u);  // every fire but the first worker's
  for (const auto& [key, count] : times) {
    const bool odd = std::stoi(key.substr(1, key.find('@') - 1)) % 2 == 1;
    if (odd) {
      EXPECT_EQ(count, 1u) << key;  // dropped at its first look
    }
    EXPECT_LE(count, detail::Fire::max_looks) << key;
  }
  std::size_t elsewhere = 0;
  for (const auto& skipped : h.log->all<SkippedFireEvent>()) elsewhere += skipped.reason == SkipReason::already_claimed;
  EXPECT_EQ(elsewhere, 10u);
}

TEST(Coordination, ConcurrentBatchesClaimNoMoreThanTheWorkersCanStart) {
  // Review finding: workers busy claiming counted as free, so two batches
  // at once claimed four fires for two workers; the extras waited, claimed,
  // behind running jobs (and were lost if the process stopped).
  class SlowBatches final : public Claimer {
   public:
    ClaimResult claim(std::string_view) override { return ClaimResult::claimed(++fence); }
    std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override {
      std::unique_lock lock(mutex);
      ++inside;
      cv.notify_all();
      // Overlap with a second batch if there is one (bounded: with one
      // batch at a time, nobody comes).
      cv.wait_for(lock, 300ms, [&] { return inside >= 2; });
      lock.unlock();
      std::vector<ClaimResult> out;
      for (std::size_t i = 0; i < keys.size(); ++i) out.push_back(claim(keys[i]));
      return out;
    }
    std::mutex mutex;
    std::condition_variable cv;
    int inside = 0;
    std::atomic<std::uint64_t> fence{0};
  };
  Harness h;
  auto claimer = std::make_shared<SlowBatches>();
  auto options = h.options();
  options.claimer = claimer;
  options.limits.max_concurrent = 2;
  std::mutex mutex;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  Scheduler s(options);
  for (int i = 0; i < 4; ++i) {
    s.add("* * * * *", [&](const FireContext&, std::stop_token) {
      std::unique_lock lock(mutex);
      ++started;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }, EntryOptions{.key = "k" + std::to_string(i)});
  }
  s.start();
  h.advance(60s);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return started == 2; }));
  }
  // Both workers run a job: exactly their two fires are claimed; the other
  // two wait unclaimed for a worker.
  EXPECT_EQ(claimer->fence.load(), 2u);
  {
    std::lock_guard guard(mutex);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(4));
  EXPECT_EQ(claimer->fence.load(), 4u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, OverlapIsDecidedBeforeTheClaim) {
  // Review finding: a replica whose previous run still went claimed its
  // share of the next fires and then dropped them, while idle replicas had
  // been told already-claimed. Now it does not claim: the others run them.
  struct Counting final : Claimer {
    ClaimResult claim(std::string_view) override { return ClaimResult::claimed(++claims); }
    std::atomic<std::uint64_t> claims{0};
  };
  for (const auto policy : {OverlapPolicy::skip, OverlapPolicy::queue}) {
    Harness h;
    auto claimer = std::make_shared<Counting>();
    auto options = h.options();
    options.claimer = claimer;
    options.seconds_field = true;
    std::mutex mutex;
    std::condition_variable cv;
    int started = 0;
    bool release = false;
    Scheduler s(options);
    s.add("* * * * * *", [&](const FireContext&, std::stop_token) {
      std::unique_lock lock(mutex);
      ++started;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }, EntryOptions{.key = "slow", .overlap = policy});
    s.start();
    h.advance(1s);
    {
      std::unique_lock lock(mutex);
      ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return started == 1; }));
    }
    h.advance(1s);  // the second fire: skipped (skip) or waiting unclaimed (queue)
    h.advance(1s);  // the third: skipped either way (queue: one waits already)
    ASSERT_TRUE(h.log->wait_count<SkippedFireEvent>(policy == OverlapPolicy::skip ? 2 : 1));
    EXPECT_EQ(claimer->claims.load(), 1u) << to_string(policy);  // only the running fire was claimed
    for (const auto& skipped : h.log->all<SkippedFireEvent>()) EXPECT_EQ(skipped.reason, SkipReason::overlap);
    {
      std::lock_guard guard(mutex);
      release = true;
    }
    cv.notify_all();
    if (policy == OverlapPolicy::queue) {
      ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(2));  // the queued one ran after the first, claimed then
      EXPECT_EQ(claimer->claims.load(), 2u);
    }
    EXPECT_TRUE(s.stop(h.soon()));
  }
}

// Review finding: the overlap slot was released before the run's
// completion was reported, so a queued fire could start (and report its
// start) while the previous run still looked running.
TEST(Coordination, AQueuedFireStartsAfterThePreviousRunIsReportedComplete) {
  // The recorder holds the first run's completion for a moment, waiting
  // for the queued fire to start: it must not, until the completion is out.
  class Holding final : public Observer {
   public:
    explicit Holding(std::shared_ptr<Observer> inner) : inner_(std::move(inner)) {}
    void on_event(const Event& event) override {
      const auto* done = std::get_if<JobCompletedEvent>(&event);
      if (done != nullptr && done->fire_key == "slow@2026-01-01T00:00:01Z") {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, 200ms, [&] { return second_started_; });  // an observation window
      }
      if (const auto* start = std::get_if<JobStartedEvent>(&event); start && start->attempt == 1 &&
                                                                    start->fire_key == "slow@2026-01-01T00:00:02Z") {
        std::lock_guard guard(mutex_);
        second_started_ = true;
        cv_.notify_all();
      }
      inner_->on_event(event);
    }

   private:
    std::shared_ptr<Observer> inner_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool second_started_ = false;
  };
  Harness h;
  auto options = h.options();
  options.recorder = std::make_shared<Holding>(h.log);
  options.seconds_field = true;
  std::mutex mutex;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  Scheduler s(options);
  s.add("* * * * * *", [&](const FireContext&, std::stop_token) {
    std::unique_lock lock(mutex);
    if (++started > 1) return;  // the queued fire: done at once
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  }, EntryOptions{.key = "slow", .overlap = OverlapPolicy::queue});
  s.start();
  h.advance(1s);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return started == 1; }));
  }
  h.advance(1s);  // the second fire waits for the first
  h.settle(Harness::idle_waiters);
  {
    std::lock_guard guard(mutex);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(2));
  // In the recorder's order: start 1, completion 1, start 2, completion 2.
  std::vector<std::string> order;
  ASSERT_TRUE(h.log->wait_for([&](const std::vector<Event>& events) {
    order.clear();
    for (const auto& event : events) {
      if (const auto* start = std::get_if<JobStartedEvent>(&event)) order.push_back("start " + start->fire_key);
      if (const auto* done = std::get_if<JobCompletedEvent>(&event)) order.push_back("done " + done->fire_key);
    }
    return order.size() == 4;
  }));
  EXPECT_EQ(order, (std::vector<std::string>{"start slow@2026-01-01T00:00:01Z", "done slow@2026-01-01T00:00:01Z",
                                             "start slow@2026-01-01T00:00:02Z", "done slow@2026-01-01T00:00:02Z"}));
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, ABatchAsksTheElectorOnceAndFencesWithTheClaim) {
  Harness h;
  auto lease = std::make_shared<MemoryLease>(h.clock, 30s);
  auto claimer = std::make_shared<BatchRecorder>();
  auto options = h.options();
  options.claimer = claimer;
  options.elector = lease->make_elector();
  options.limits.max_concurrent = 8;
  Scheduler s(options);
  std::atomic<int> runs{0};
  for (int i = 0; i < 4; ++i) {
    s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
      EXPECT_GE(c.fence, 1000u);  // the claim's token, not the term
      ++runs;
    }, EntryOptions{.key = "k" + std::to_string(i)});
  }
  s.start();
  h.advance(60s, 1, [&] { return h.completed() + h.log->count<SkippedFireEvent>() == 4; });
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(claimer->batch_sizes, std::vector<std::size_t>{4});
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, FenceIsTheTermWithAnElectorAndTheClaimTokenWithAClaimer) {
  Harness h;
  auto lease = std::make_shared<MemoryLease>(h.clock, 30s);
  auto options = h.options();
  options.elector = lease->make_elector();
  std::atomic<std::uint64_t> fence{0};
  Scheduler s(options);
  s.add("* * * * *", [&](const FireContext& c, std::stop_token) { fence = c.fence; });
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  EXPECT_EQ(fence, lease->term());
  EXPECT_GT(fence, 0u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, DrainResignsBeforeWaitingForRunningJobs) {
  // Review finding: drain() kept the lease until its running jobs ended, so
  // other replicas skipped every fire as not-leader for the whole grace.
  Harness h;
  auto lease = std::make_shared<MemoryLease>(h.clock, 30s);
  auto options = h.options();
  options.elector = lease->make_elector();
  auto other = lease->make_elector();
  std::mutex mutex;
  std::condition_variable cv;
  bool started = false, release = false;
  Scheduler s(options);
  s.add("* * * * *", [&](const FireContext&, std::stop_token) {
    std::unique_lock lock(mutex);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  s.start();
  h.advance(60s);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return started; }));
  }
  EXPECT_EQ(other->is_leader().status, Leadership::Status::follower);
  std::thread drainer([&] { EXPECT_TRUE(s.drain(h.clock->steady_now() + 3600s)); });
  // While the job still runs, the lease is already free for the other replica.
  EXPECT_TRUE(Harness::eventually([&] { return other->is_leader().status == Leadership::Status::leader; }));
  {
    std::lock_guard guard(mutex);
    release = true;
  }
  cv.notify_all();
  drainer.join();
}

TEST(Coordination, LeadershipLossCancelsLeaderGatedRuns) {
  for (const auto policy : {LeadershipLossPolicy::cancel, LeadershipLossPolicy::let_finish}) {
    Harness h;
    auto lease = std::make_shared<MemoryLease>(h.clock, 30s);
    auto options = h.options();
    options.elector = lease->make_elector();
    options.on_leadership_lost = policy;
    std::atomic<bool> entered{false}, saw_stop{false}, release{false};
    Scheduler s(options);
    s.add("* * * * *", [&](const FireContext&, std::stop_token stop) {
      entered = true;
      while (!stop.stop_requested() && !release) std::this_thread::yield();
      saw_stop = stop.stop_requested();
    });
    s.start();
    h.advance(60s, 1, [&] { return entered.load(); });
    auto rival = lease->make_elector();
    h.clock->advance(31s);  // our lease lapses (no renewal while the job runs)
    EXPECT_EQ(rival->is_leader().status, Leadership::Status::leader);
    if (policy == LeadershipLossPolicy::cancel) {
      ASSERT_TRUE(Harness::eventually([&] { return saw_stop.load(); }));
    } else {
      EXPECT_FALSE(saw_stop);
      release = true;
    }
    ASSERT_TRUE(h.log->wait_count<JobCompletedEvent>(1));
    EXPECT_TRUE(s.stop(h.soon()));
  }
}

/// Leads with whatever term the test sets, and reports losses on demand.
class ScriptedElector final : public Elector {
 public:
  Leadership is_leader() override { return Leadership::leader(term.load()); }
  void on_leadership_lost(std::function<void(std::uint64_t)> callback) override {
    std::lock_guard guard(mutex);
    lost = std::move(callback);
  }
  void lose(std::uint64_t lost_term) {
    std::function<void(std::uint64_t)> callback;
    {
      std::lock_guard guard(mutex);
      callback = lost;
    }
    if (callback) callback(lost_term);
  }
  std::atomic<std::uint64_t> term{0};
  std::mutex mutex;
  std::function<void(std::uint64_t)> lost;
};

/// A leader that asks the scheduler whether it is fit to lead, when told.
struct LivenessProbe final : Elector {
  Leadership is_leader() override { return Leadership::leader(1); }
  void set_liveness(std::function<bool()> callback) override { alive = std::move(callback); }
  std::function<bool()> alive;
};

TEST(Coordination, TheElectorLearnsWhenTheLoopIsWedged) {
  // The loop passes at least every second; a recorder that blocks it (as a
  // blocked log once did) must make the scheduler report itself not alive,
  // so a keep-alive elector stops renewing (RedisElector.AWedged…).
  struct Blocking final : Observer {
    void on_event(const Event& event) override {
      if (!std::holds_alternative<ScheduledEvent>(event)) return;
      std::unique_lock lock(mutex);
      if (armed) {
        inside = true;
        cv.notify_all();
        cv.wait(lock, [&] { return !armed; });
      }
    }
    std::mutex mutex;
    std::condition_variable cv;
    bool armed = false, inside = false;
  };
  Harness h;
  auto elector = std::make_shared<LivenessProbe>();
  auto blocking = std::make_shared<Blocking>();
  auto options = h.options();
  options.elector = elector;
  options.recorder = blocking;  // inline, on the loop thread
  Scheduler s(options);
  s.add("* * * * *", [](const FireContext&, std::stop_token) {});
  s.start();
  ASSERT_TRUE(elector->alive);
  h.advance(2s);
  h.settle(Harness::idle_waiters);
  EXPECT_TRUE(elector->alive());
  {
    std::lock_guard guard(blocking->mutex);
    blocking->armed = true;
  }
  h.clock->advance(58s);  // the fire: the loop plans the next one and blocks in the recorder
  {
    std::unique_lock lock(blocking->mutex);
    ASSERT_TRUE(blocking->cv.wait_for(lock, 10s, [&] { return blocking->inside; }));
  }
  EXPECT_TRUE(elector->alive());   // the pass that blocked is new: counts as progress
  EXPECT_TRUE(elector->alive());   // no pass since: suspect from now (a pause could explain it)
  h.clock->advance(2s);
  EXPECT_TRUE(elector->alive());   // suspect for 2 s
  h.clock->advance(2s);
  EXPECT_FALSE(elector->alive());  // 4 s without a pass: wedged
  {
    std::lock_guard guard(blocking->mutex);
    blocking->armed = false;
  }
  blocking->cv.notify_all();
  h.clock->advance(1s);
  EXPECT_TRUE(Harness::eventually([&] { return elector->alive(); }));
  EXPECT_TRUE(s.stop(h.soon()));
  EXPECT_FALSE(elector->alive());  // stopped: nothing to renew for
}

TEST(Coordination, TheElectorKeepsASlowLoopAlive) {
  // A busy host (docs/reliability.md, "A busy host"): the loop's passes
  // come late, 2.9 s apart instead of at most 1 s, but they come. The
  // elector looks twice between them (it renews at a third of its TTL):
  // the replica stays fit to lead. Only a loop with no pass for
  // liveness_bound (3 s) after a look found none is unfit (the test above).
  Harness h;
  auto elector = std::make_shared<LivenessProbe>();
  auto options = h.options();
  options.elector = elector;
  Scheduler s(options);
  s.add("@every 1s", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "every-second"});
  s.start();
  ASSERT_TRUE(elector->alive);
  for (int pass = 0; pass < 20; ++pass) {
    h.clock->advance(2900ms);  // one late wake of the loop: one pass
    h.settle(Harness::idle_waiters);
    EXPECT_TRUE(elector->alive()) << "pass " << pass;  // a new pass
    EXPECT_TRUE(elector->alive()) << "pass " << pass;  // none since: suspect, not unfit
  }
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, ALeaderWhoseClaimsKeepFailingStepsDown) {
  // Review finding (both mode): a leader whose clock was beyond the skew
  // guard kept the lease while every claim it made was refused, and
  // nothing ran anywhere. After claim_failure_step_down of failures it
  // reports itself unfit, so its elector frees the lease (RedisElector…).
  struct Skewed final : Claimer {
    ClaimResult claim(std::string_view) override { return ClaimResult::skewed("local clock 10m ahead"); }
  };
  struct Probe final : Elector {
    Leadership is_leader() override { return Leadership::leader(3); }
    void set_liveness(std::function<bool()> callback) override { fit = std::move(callback); }
    std::function<bool()> fit;
  };
  Harness h;
  auto elector = std::make_shared<Probe>();
  auto options = h.options();
  options.elector = elector;
  options.claimer = std::make_shared<Skewed>();
  options.seconds_field = true;
  Scheduler s(options);
  s.add("* * * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "k"});
  s.start();
  for (std::size_t second = 1; second <= 3; ++second) {
    h.advance(1s, 1, [&] { return h.log->count<SkippedFireEvent>() >= second; });
  }
  EXPECT_TRUE(elector->fit());  // failing for 2 s: not yet
  for (std::size_t second = 4; second <= 7; ++second) {
    h.advance(1s, 1, [&] { return h.log->count<SkippedFireEvent>() + h.log->count<LeadershipStepDownEvent>() >= second; });
  }
  ASSERT_TRUE(h.log->wait_count<LeadershipStepDownEvent>(1));
  EXPECT_FALSE(elector->fit());
  const auto step = h.log->all<LeadershipStepDownEvent>().front();
  EXPECT_GE(step.failing_for, 5s);
  EXPECT_EQ(step.last_error, "local clock 10m ahead");
  h.clock->advance(31s);  // the hold ends: it may campaign again
  EXPECT_TRUE(Harness::eventually([&] { return elector->fit(); }));
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, IsolatedClaimFailuresDoNotAddUpToAStepDown) {
  // Review finding: two transient failures an hour apart counted as an
  // hour of failing claims. Failures must be continuous.
  struct Flaky final : Claimer {
    ClaimResult claim(std::string_view) override { return ClaimResult::failed("transient"); }
  };
  Harness h;
  auto options = h.options();
  options.elector = std::make_shared<ScriptedElector>();
  options.claimer = std::make_shared<Flaky>();
  Scheduler s(options);
  s.add("0 * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "hourly"});
  s.start();
  for (std::size_t hour = 1; hour <= 3; ++hour) {
    h.advance(1h, 1, [&] { return h.log->count<SkippedFireEvent>() >= hour; });
  }
  EXPECT_EQ(h.log->count<LeadershipStepDownEvent>(), 0u);
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, OnlyTheTermThatWasLostIsRefused) {
  // Review finding: every term up to the highest lost one was refused, so
  // after a NATS leader bucket was recreated (revisions, hence terms, start
  // at 1 again) a long-running replica won and skipped every fire.
  Harness h;
  auto elector = std::make_shared<ScriptedElector>();
  elector->term = 100;
  auto options = h.options();
  options.elector = elector;
  std::vector<std::uint64_t> fences;
  std::mutex mutex;
  Scheduler s(options);
  s.add("* * * * *", [&](const FireContext& c, std::stop_token) {
    std::lock_guard guard(mutex);
    fences.push_back(c.fence);
  });
  s.start();
  h.advance(60s, 1, [&] { return h.completed() == 1; });
  elector->lose(100);
  elector->term = 1;  // the bucket was recreated: a new leadership at revision 1
  h.advance(60s, 1, [&] { return h.completed() == 2; });
  elector->lose(1);  // lost, yet (racing) still reported by is_leader(): that term is refused
  h.advance(60s, 1, [&] { return h.log->count<SkippedFireEvent>() == 1; });
  {
    std::lock_guard guard(mutex);
    EXPECT_EQ(fences, (std::vector<std::uint64_t>{100, 1}));
  }
  const auto skipped = h.log->all<SkippedFireEvent>();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].reason, SkipReason::not_leader);
  EXPECT_EQ(skipped[0].error, "leadership of term 1 was lost");
  EXPECT_TRUE(s.stop(h.soon()));
}

TEST(Coordination, LeadershipIsDecidedAtTheInstantAndHoldsThroughTheJitter) {
  // Review finding: each replica slept its own jitter before asking the
  // elector, so a handover inside the jitter window ran a fire twice (or
  // never) in leader-only mode.
  Harness h;
  auto elector = std::make_shared<ScriptedElector>();
  elector->term = 1;
  auto options = h.options();
  options.elector = elector;
  options.claimer = std::make_shared<MemoryClaimer>(h.clock);
  options.random_seed = 7;
  Scheduler s(options);
  s.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.key = "j", .jitter = 10s});
  s.start();
  h.advance(60s);
  h.settle(Harness::idle_waiters + 1);  // leader of term 1 at the instant; now in its jitter
  elector->term = 2;                    // a handover (and back) inside the window
  h.advance(10s, 1, [&] { return h.log->count<SkippedFireEvent>() == 1; });
  const auto skipped = h.log->all<SkippedFireEvent>();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].reason, SkipReason::not_leader);
  EXPECT_EQ(skipped[0].error, "the leadership term changed during the jitter (1 to 2)");
  EXPECT_EQ(h.completed(), 0u);
  EXPECT_TRUE(s.stop(h.soon()));

  // Without a claimer nothing would catch the double run: refused.
  SchedulerOptions leader_only = h.options();
  leader_only.elector = elector;
  Scheduler refusing(leader_only);
  try {
    refusing.add("* * * * *", [](const FireContext&, std::stop_token) {}, EntryOptions{.jitter = 1s});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--coordination both"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fleetcron::test
