// The replica registry as the scheduler uses it (docs/fleet-state.md#replica-registry):
// a replica whose deduplication settings differ from the fleet's, or are
// not verified yet, claims nothing; one with other jobs is only reported.
// Memory stores on a virtual clock; Redis and NATS in tests/e2e/.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "scheduler/harness.h"
#include "support/forwarding_fleet_state.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

// Each replica's loop, watchdog, catch-up and upkeep threads wait on the clock.
constexpr std::size_t waiters_per_replica = 4;

/// One replica: its scheduler, events and log lines.
struct Replica {
  std::shared_ptr<EventLog> events = std::make_shared<EventLog>();
  std::mutex mutex;
  std::vector<std::string> messages;
  std::unique_ptr<Scheduler> scheduler;
  bool stopped = false;

  bool logged(std::string_view part) {
    std::lock_guard guard(mutex);
    return std::any_of(messages.begin(), messages.end(), [&](const std::string& m) { return m.find(part) != m.npos; });
  }
  std::size_t settings_skips() {
    const auto skips = events->all<SkippedFireEvent>();
    return static_cast<std::size_t>(std::count_if(skips.begin(), skips.end(), [](const SkippedFireEvent& e) {
      return e.reason == SkipReason::fleet_settings;
    }));
  }
};

/// Replicas of one fleet on one memory fleet state and claimer.
class RegistryFleet {
 public:
  explicit RegistryFleet(Harness& h, std::shared_ptr<FleetState> state = nullptr)
      : h_(h),
        state_(state ? std::move(state) : std::make_shared<MemoryFleetState>(h.clock)),
        claimer_(std::make_shared<MemoryClaimer>(h.clock, 10min)) {}

  /// A replica stating claim_ttl = `claim_ttl`, running `spec` under key "job".
  Replica& add(std::string claim_ttl, const char* spec = "* * * * *") {
    auto& replica = *replicas_.emplace_back(std::make_unique<Replica>());
    auto options = h_.options();
    options.fleet_state = state_;
    options.claimer = claimer_;
    options.recorder = replica.events;
    options.logger = [&replica](LogLevel, std::string_view message) {
      std::lock_guard guard(replica.mutex);
      replica.messages.emplace_back(message);
    };
    options.replica_id = "replica-" + std::to_string(replicas_.size());
    options.registry_heartbeat_interval = heartbeat;
    options.replica.host = "host-" + std::to_string(replicas_.size());
    options.replica.settings = {{"claim_ttl", std::move(claim_ttl)}, {"mode", "claim"}};
    replica.scheduler = std::make_unique<Scheduler>(options);
    EntryOptions entry;
    entry.key = "job";
    replica.scheduler->add(spec, [](const FireContext&, std::stop_token) {}, entry);
    replica.scheduler->start();
    return replica;
  }

  /// Whether the registry holds `id` now, accepted or not.
  std::optional<bool> accepted(const std::string& id) {
    const RegistryRead read = state_->read_replicas(h_.clock->now());
    EXPECT_EQ(read.status, RegistryRead::Status::found) << read.error;
    for (const auto& record : read.replicas) {
      if (record.replica.replica_id == id) return record.accepted;
    }
    return std::nullopt;
  }

  void settle() { h_.settle(waiters_per_replica * running()); }
  std::size_t running() {
    return static_cast<std::size_t>(
        std::count_if(replicas_.begin(), replicas_.end(), [](const auto& r) { return !r->stopped; }));
  }
  bool stop(Replica& replica) {
    replica.stopped = true;
    return replica.scheduler->stop(h_.soon());
  }
  FleetState& state() { return *state_; }
  /// Long enough that records outlive the tests' 60 s steps (they live 3
  /// heartbeats): a step past a record's life would drop it, as a replica
  /// paused that long is dropped. Announcements at 50, 110, 170, 230 s…
  std::chrono::nanoseconds heartbeat = 50s;

 private:
  Harness& h_;
  std::shared_ptr<FleetState> state_;
  std::shared_ptr<MemoryClaimer> claimer_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // last: destroyed (stopped) first
};

std::size_t completed(Replica& r) { return r.events->count<JobCompletedEvent>(); }

TEST(SchedulerRegistry, AReplicaWithAnotherClaimTtlClaimsNothingWhileTheFleetsReplicaLives) {
  Harness h;
  RegistryFleet fleet(h);
  Replica& first = fleet.add("10m");
  Replica& other = fleet.add("20m");
  EXPECT_EQ(fleet.accepted("replica-1"), true);
  EXPECT_EQ(fleet.accepted("replica-2"), false);
  EXPECT_TRUE(other.logged("claim_ttl is 20m here, 10m in the fleet")) << "the refusal names the setting";
  EXPECT_TRUE(other.logged("replica-1 on host-1"));
  // Every fire of the minute: run by the first, refused on the other before
  // its claim (the claimer alone would hand some to it).
  for (int minute = 1; minute <= 3; ++minute) {
    fleet.settle();
    h.clock->advance(60s);
    ASSERT_TRUE(Harness::eventually([&] {
      return completed(first) == static_cast<std::size_t>(minute) && other.settings_skips() == static_cast<std::size_t>(minute);
    })) << "minute " << minute << ": " << completed(first) << " runs, " << other.settings_skips() << " refused, "
         << first.events->count<SkippedFireEvent>() << " skips on the first, " << completed(other) << " on the other";
  }
  EXPECT_EQ(completed(other), 0u);

  // The fleet's replica stops (and withdraws): at its next announcement the
  // other one's settings are the fleet's, and it claims.
  ASSERT_TRUE(fleet.stop(first));
  EXPECT_EQ(fleet.accepted("replica-1"), std::nullopt) << "a clean stop removes the record";
  fleet.settle();
  h.clock->advance(50s);
  ASSERT_TRUE(Harness::eventually([&] { return other.logged("settings are the fleet's"); }));
  EXPECT_EQ(fleet.accepted("replica-2"), true);
  fleet.settle();
  h.clock->advance(10s);
  ASSERT_TRUE(Harness::eventually([&] { return completed(other) == 1; }));
  EXPECT_EQ(other.settings_skips(), 3u);
}

TEST(SchedulerRegistry, AReplicaWithOtherJobsIsReportedNotRefused) {
  Harness h;
  RegistryFleet fleet(h);
  Replica& first = fleet.add("10m");
  Replica& other = fleet.add("10m", "*/2 * * * *");
  EXPECT_EQ(fleet.accepted("replica-2"), true);
  EXPECT_TRUE(other.logged("replica-1 on host-1 run other jobs")) << "reported by the one that sees it";
  fleet.settle();
  h.clock->advance(60s);  // minute 1: only the first runs "job" then
  ASSERT_TRUE(Harness::eventually([&] { return completed(first) == 1; }));
  fleet.settle();
  h.clock->advance(60s);  // minute 2: both have it; the claims give it to one
  ASSERT_TRUE(Harness::eventually([&] { return completed(first) + completed(other) == 2; }));
  EXPECT_EQ(first.settings_skips() + other.settings_skips(), 0u);
}

// A fleet state whose registry fails while `failing` is set.
class FailingRegistry final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  StoredDocument load_document(Document which) override {
    if (failing && which == Document::registry) return {StoredDocument::Status::error, {}, 0, "registry down"};
    return ForwardingFleetState::load_document(which);
  }
  std::atomic<bool> failing{false};
};

TEST(SchedulerRegistry, UnverifiedSettingsRefuseClaimsUntilAnAnnouncementSucceeds) {
  Harness h;
  auto state = std::make_shared<FailingRegistry>(std::make_shared<MemoryFleetState>(h.clock));
  state->failing = true;
  RegistryFleet fleet(h, state);
  fleet.heartbeat = 5s;  // a record lives 15 s; a failed announcement is retried after 1 s
  Replica& replica = fleet.add("10m");
  EXPECT_TRUE(replica.logged("not verified against the fleet's (the replica registry failed: registry down)"));
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return replica.settings_skips() == 1; }));
  // Failed announcements are tried again after a fifth of the interval.
  state->failing = false;
  fleet.settle();
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] { return replica.logged("settings are the fleet's"); }));
  // Once verified, a failure is tolerated while the last record lives (3 heartbeats).
  state->failing = true;
  fleet.settle();
  h.clock->advance(59s);  // minute 2, 59 s after the last success: past the record's 15 s
  ASSERT_TRUE(Harness::eventually([&] { return replica.settings_skips() == 2; }));
  EXPECT_EQ(completed(replica), 0u);
  state->failing = false;
  fleet.settle();
  h.clock->advance(1s);  // 2:01, the retry: accepted
  ASSERT_TRUE(Harness::eventually([&] { return fleet.accepted("replica-1") == true; }));
  for (int i = 0; i < 10; ++i) {  // announced every 5 s, the last at 2:51
    fleet.settle();
    h.clock->advance(5s);
  }
  state->failing = true;
  fleet.settle();
  h.clock->advance(5s);  // 2:56: this announcement fails
  ASSERT_TRUE(Harness::eventually([&] { return replica.logged("announcing this replica failed"); }));
  fleet.settle();
  h.clock->advance(4s);  // minute 3, 9 s after the last success
  ASSERT_TRUE(Harness::eventually([&] { return completed(replica) == 1; }))
      << "a failed announcement within the record's life refuses nothing";
  EXPECT_EQ(replica.settings_skips(), 2u);
}

}  // namespace
}  // namespace fleetcron::test
