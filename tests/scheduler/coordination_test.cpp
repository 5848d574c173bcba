// Coordination: several schedulers sharing one in-memory claimer and lease;
// failing backends; fencing tokens; leadership loss.
#include <map>
#include <set>

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
    options.max_concurrent = 2;
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

}  // namespace
}  // namespace fleetcron::test
