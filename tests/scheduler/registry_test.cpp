// The replica registry as the scheduler uses it (docs/fleet-state.md#replica-registry):
// a replica whose deduplication settings differ from the fleet's, or are
// not verified yet, claims nothing; one with other jobs is only reported.
// Memory stores on a virtual clock; Redis and NATS in tests/e2e/.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "scheduler/harness.h"
#include "support/forwarding_fleet_state.h"
#include "support/offset_clock.h"

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

  /// A replica stating claim_ttl = `claim_ttl`, running `spec` under key
  /// "job" (`job`, or nothing), through `through` (default: the fleet's state).
  Replica& add(std::string claim_ttl, const char* spec = "* * * * *", Job job = {},
               std::shared_ptr<FleetState> through = nullptr, RecoverPolicy recover = RecoverPolicy::report,
               std::shared_ptr<Elector> elector = nullptr) {
    auto& replica = *replicas_.emplace_back(std::make_unique<Replica>());
    auto options = h_.options();
    if (clock_of_next) options.clock = std::exchange(clock_of_next, nullptr);
    options.elector = std::move(elector);
    options.fleet.state = through ? std::move(through) : state_;
    options.claimer = claimer_;
    options.recorder = replica.events;
    options.logger = [&replica](LogLevel, std::string_view message) {
      std::lock_guard guard(replica.mutex);
      replica.messages.emplace_back(message);
    };
    options.fleet.replica_id = std::exchange(id_of_next, std::nullopt).value_or("replica-" + std::to_string(replicas_.size()));
    options.fleet.registry_heartbeat_interval = heartbeat;
    options.fleet.replica.host = "host-" + std::to_string(replicas_.size());
    options.fleet.replica.settings = {{"claim_ttl", std::move(claim_ttl)}, {"mode", "claim"}};
    replica.scheduler = std::make_unique<Scheduler>(options);
    EntryOptions entry;
    entry.key = "job";
    entry.recover = recover;
    entry.overlap = overlap;
    if (!job) job = [](const FireContext&, std::stop_token) {};
    replica.scheduler->add(spec, std::move(job), entry);
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
  /// Harness::settle_runs() over the replicas still running.
  void settle_runs(std::size_t runs) {
    std::vector<const Scheduler*> live;
    for (const auto& replica : replicas_) {
      if (!replica->stopped) live.push_back(replica->scheduler.get());
    }
    Harness::settle_runs(live, runs);
  }
  std::size_t running() {
    return static_cast<std::size_t>(
        std::count_if(replicas_.begin(), replicas_.end(), [](const auto& r) { return !r->stopped; }));
  }
  bool stop(Replica& replica) {
    replica.stopped = true;
    return replica.scheduler->stop(h_.soon());
  }
  FleetState& state() { return *state_; }
  std::shared_ptr<FleetState> shared_state() { return state_; }
  /// Long enough that records outlive the tests' 60 s steps (they live 3
  /// heartbeats): a step past a record's life would drop it, as a replica
  /// paused that long is dropped. Announcements at 50, 110, 170, 230 s…
  std::chrono::nanoseconds heartbeat = 50s;
  OverlapPolicy overlap = OverlapPolicy::allow;  // of the replicas added from here
  std::shared_ptr<Clock> clock_of_next;  // the next replica's clock (default: the harness's)
  std::optional<std::string> id_of_next;  // the next replica's id (default: replica-N)

 private:
  Harness& h_;
  std::shared_ptr<FleetState> state_;
  std::shared_ptr<MemoryClaimer> claimer_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // last: destroyed (stopped) first
};

std::size_t completed(Replica& r) { return r.events->count<JobCompletedEvent>(); }

/// The runs the oldest live replica's record lists now.
std::size_t oldest_runs(RegistryFleet& fleet, Harness& h) {
  const RegistryRead read = fleet.state().read_replicas(h.clock->now());
  EXPECT_EQ(read.status, RegistryRead::Status::found) << read.error;
  return read.replicas.empty() ? 0 : read.replicas.front().replica.runs.size();
}

/// A job that runs until released (at the latest when it is destroyed:
/// declare it after the fleet, so its runs end before the replicas stop),
/// counting its runs and how many ran at once.
struct LongJob {
  /// Shared with the job: a run may read `release` after the LongJob is
  /// gone (destroyed before the fleet, so that a failed assertion never
  /// leaves the fleet's destructor waiting for the job).
  struct State {
    std::atomic<int> running{0};
    std::atomic<int> most{0};
    std::atomic<int> starts{0};
    std::atomic<bool> release{false};
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  std::atomic<int>& running = state->running;
  std::atomic<int>& most = state->most;
  std::atomic<int>& starts = state->starts;
  std::atomic<bool>& release = state->release;
  ~LongJob() { release = true; }
  Job job() {
    return [s = state](const FireContext&, std::stop_token) {
      const int now = ++s->running;
      int seen = s->most.load();
      while (seen < now && !s->most.compare_exchange_weak(seen, now)) {
      }
      ++s->starts;
      while (!s->release) std::this_thread::sleep_for(1ms);
      --s->running;
    };
  }
};

// A fleet state whose registry fails while `failing` is set.
class FailingRegistry final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  StoredDocument load_document(DocumentId which) override {
    if (failing && which == Document::registry) return {StoredDocument::Status::error, {}, 0, "registry down"};
    return ForwardingFleetState::load_document(which);
  }
  std::atomic<bool> failing{false};
};


/// A fleet state whose documents (registry, catalogue, controls) can be
/// lost at once, as a store restarted without its data loses them.
class LosableDocuments final : public test::ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  StoredDocument load_document(DocumentId which) override { return documents()->load_document(which); }
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    return documents()->replace_document(which, seen, text, keep_for);
  }
  void lose(std::shared_ptr<Clock> clock) {
    std::lock_guard guard(mutex_);
    documents_ = std::make_shared<MemoryFleetState>(std::move(clock));
  }

 private:
  std::shared_ptr<FleetState> documents() {
    std::lock_guard guard(mutex_);
    return documents_ ? documents_ : inner_;
  }
  std::mutex mutex_;
  std::shared_ptr<FleetState> documents_;
};

std::vector<std::string> catalogued(FleetState& state, Instant now) {
  const CatalogueRead read = state.read_catalogue(now);
  EXPECT_EQ(read.status, CatalogueRead::Status::found) << read.error;
  std::vector<std::string> keys;
  for (const auto& job : read.jobs) keys.push_back(job.job_key);
  return keys;
}

// A store that lost its data (a restart without persistence, a FLUSHALL)
// lost the job catalogue too; before, it stayed empty until each replica's
// hourly rewrite (`status` said "jobs (0)", the API [] while every replica
// ran its jobs). A replica whose own registry record is gone writes the
// catalogue again at that announcement.
TEST(SchedulerRegistry, AStoreThatLostItsDataHasTheCatalogueBackAtTheNextAnnouncement) {
  Harness h;
  auto state = std::make_shared<LosableDocuments>(std::make_shared<MemoryFleetState>(h.clock));
  RegistryFleet fleet(h, state);
  Replica& a = fleet.add("10m");
  fleet.settle();
  ASSERT_EQ(catalogued(*state, h.clock->now()), std::vector<std::string>{"job"});
  state->lose(h.clock);
  ASSERT_TRUE(catalogued(*state, h.clock->now()).empty());
  h.clock->advance(fleet.heartbeat);
  fleet.settle();
  EXPECT_EQ(catalogued(*state, h.clock->now()), std::vector<std::string>{"job"});
  EXPECT_TRUE(a.logged("its jobs are catalogued again now"));
  // An announcement that finds its record does not rewrite it again.
  h.clock->advance(fleet.heartbeat);
  fleet.settle();
  std::lock_guard guard(a.mutex);
  EXPECT_EQ(std::count_if(a.messages.begin(), a.messages.end(),
                          [](const std::string& m) { return m.find("catalogued again") != std::string::npos; }),
            1);
}

/// A fleet state whose catalogue writes fail while `failing` is set; counts them.
class FailingCatalogue final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    if (which.which == Document::catalogue) {
      ++writes;
      if (failing) return {DocumentReplace::Status::error, "catalogue refused"};
    }
    return ForwardingFleetState::replace_document(which, seen, text, keep_for);
  }
  std::atomic<bool> failing{true};
  std::atomic<int> writes{0};
};

// A catalogue write that fails (the store refuses it, a part too large, the
// catalogue at its limit: each costs 64 part reads) is tried again after
// 5 s, then twice as long each time, not at every announcement; once one
// succeeds, the catalogue holds the jobs.
TEST(SchedulerRegistry, AFailedCatalogueWriteIsTriedAgainLessAndLessOften) {
  Harness h;
  auto state = std::make_shared<FailingCatalogue>(std::make_shared<MemoryFleetState>(h.clock));
  RegistryFleet fleet(h, state);
  Replica& a = fleet.add("10m");
  fleet.settle();
  ASSERT_EQ(state->writes.load(), 1);
  EXPECT_TRUE(a.logged("job catalogue: this replica's jobs were not all written (tried again in 5s): catalogue refused"));
  // 15 announcements, 50 s apart: a retry at the first one 5, 10, 20, 40,
  // 80 and 160 s after each failure (at 50, 100, 150, 200, 300 and 500 s).
  for (int i = 0; i < 15; ++i) {
    h.clock->advance(fleet.heartbeat);
    fleet.settle();
  }
  EXPECT_EQ(state->writes.load(), 7) << "the first try and six retries, not one per announcement (16)";
  EXPECT_TRUE(a.logged("(tried again in 5m20s)"));
  state->failing = false;
  for (int i = 0; i < 17 && catalogued(*state, h.clock->now()).empty(); ++i) {
    h.clock->advance(fleet.heartbeat);
    fleet.settle();
  }
  EXPECT_EQ(catalogued(*state, h.clock->now()), std::vector<std::string>{"job"});
}

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

// Two live processes started with one --replica-id (the daemon's start
// check cannot tell them apart when they start together): each replaces the
// other's record as a dead predecessor's; once one finds the other's
// written again, the younger claims nothing and says why, and neither
// reports the other's runs lost.
TEST(SchedulerRegistry, TwoLiveProcessesWithOneIdLeaveTheYoungerClaimingNothing) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.id_of_next = "twin";
  Replica& older = fleet.add("10m");
  fleet.settle();
  h.clock->advance(1s);
  fleet.id_of_next = "twin";
  Replica& younger = fleet.add("10m");
  // Announcements at 50, 51, 100, 101 s…, in either order within a step:
  // within a few the younger finds the older's record written again.
  for (int beat = 0; beat < 5; ++beat) {
    fleet.settle();
    h.clock->advance(50s);
  }
  ASSERT_TRUE(Harness::eventually([&] { return younger.logged("another live process runs as replica \"twin\""); }));
  EXPECT_TRUE(younger.logged("give each replica its own --replica-id"));
  EXPECT_FALSE(older.logged("another live process runs as replica"));
  fleet.settle();
  fleet.settle_runs(0);  // the last steps' fires decided and run: the counts below are whole
  const std::size_t older_before = completed(older), younger_before = completed(younger);
  const std::size_t skips_before = younger.settings_skips();
  h.clock->advance(60s);  // a minute boundary: only the older claims and runs
  ASSERT_TRUE(Harness::eventually(
      [&] { return completed(older) > older_before && younger.settings_skips() > skips_before; }))
      << "older " << older_before << " -> " << completed(older) << ", younger's fleet-settings skips " << skips_before
      << " -> " << younger.settings_skips() << ", younger " << younger_before << " -> " << completed(younger);
  EXPECT_EQ(completed(younger), younger_before);
  EXPECT_EQ(older.events->count<LostFireEvent>() + younger.events->count<LostFireEvent>(), 0u);
}

// A dead predecessor under the same id (a restart) is told from a twin by
// not writing again: its runs are reported lost once its record would have
// expired (its TTL after its last beat), not at the first announcement.
TEST(SchedulerRegistry, ADeadPredecessorsRunsAreReportedLostOnceItsRecordWouldHaveExpired) {
  Harness h;
  RegistryFleet fleet(h);
  ReplicaAnnouncement predecessor;
  predecessor.replica_id = "restarted";
  predecessor.host = "host-0";
  predecessor.started = cursor_instant(h.clock->now() - 10min);
  predecessor.runs.push_back(RunningFire{"job", "job@2026-01-01T00:00:00Z", parse_rfc3339("2026-01-01T00:00:00Z"), 7,
                                         parse_rfc3339("2026-01-01T00:00:00Z")});
  ASSERT_NE(fleet.state().announce_replica(predecessor, h.clock->now(), 150s).status, ReplicaAnnounce::Status::error);
  fleet.id_of_next = "restarted";
  Replica& restarted = fleet.add("10m");
  EXPECT_EQ(restarted.events->count<LostFireEvent>(), 0u) << "not yet: it could be a live twin";
  for (int beat = 0; beat < 2; ++beat) {  // 100 s: its record (150 s) would still live
    fleet.settle();
    h.clock->advance(50s);
  }
  fleet.settle();
  EXPECT_EQ(restarted.events->count<LostFireEvent>(), 0u);
  h.clock->advance(50s);  // 150 s
  ASSERT_TRUE(Harness::eventually([&] { return restarted.events->count<LostFireEvent>() == 1; }));
  EXPECT_EQ(restarted.events->all<LostFireEvent>().front().fire_key, "job@2026-01-01T00:00:00Z");
  EXPECT_FALSE(restarted.logged("another live process runs as replica"));
}

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

/// An elector that never leads and keeps what the scheduler says of its
/// fitness to lead (a real one campaigns only while it holds).
class WatchedElector final : public Elector {
 public:
  Leadership is_leader() override { return Leadership::follower(); }
  void set_liveness(std::function<bool()> alive) override { alive_ = std::move(alive); }
  bool fit() const { return alive_ && alive_(); }

 private:
  std::function<bool()> alive_;
};

TEST(SchedulerRegistry, ARefusedReplicaIsNotFitToLead) {
  Harness h;
  RegistryFleet fleet(h);
  auto accepted = std::make_shared<WatchedElector>();
  auto refused = std::make_shared<WatchedElector>();
  fleet.add("10m", "* * * * *", {}, nullptr, RecoverPolicy::report, accepted);
  fleet.add("20m", "* * * * *", {}, nullptr, RecoverPolicy::report, refused);
  EXPECT_TRUE(accepted->fit());
  EXPECT_FALSE(refused->fit()) << "it would hold the lease and run nothing, and nobody else would lead";
}

// A replica that stops announcing itself while it runs a fire (it died, or
// lost the store) has that run reported lost by exactly one other replica,
// in the ledger, once its record expires.
TEST(SchedulerRegistry, ARunWhoseRunnerStopsAnnouncingIsReportedLostOnce) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;  // records live 15 s
  auto dark = std::make_shared<FailingRegistry>(fleet.shared_state());
  LongJob blocking;  // released when the test ends, even by a failed assertion
  Replica& runner = fleet.add("10m", "* * * * *", blocking.job(), dark);
  Replica& other = fleet.add("10m", "0 0 1 1 *");  // never fires in the test
  Replica& third = fleet.add("10m", "0 0 1 1 *");
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return blocking.starts.load() > 0; }));
  // The run is listed within a second of its start (its runner's worker
  // waits in the job, not on the clock).
  h.settle(3 * waiters_per_replica);
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] {
    const RegistryRead read = fleet.state().read_replicas(h.clock->now());
    return !read.replicas.empty() && read.replicas.front().replica.runs.size() == 1;
  }));
  dark->failing = true;  // the runner goes dark
  for (int i = 0; i < 4; ++i) {  // 20 s: its record (last beat at 1:01) expires at 1:16
    h.settle(3 * waiters_per_replica);
    h.clock->advance(5s);
  }
  ASSERT_TRUE(Harness::eventually([&] {
    return other.events->count<LostFireEvent>() + third.events->count<LostFireEvent>() == 1;
  }));
  Replica& reporter = other.events->count<LostFireEvent>() == 1 ? other : third;
  const LostFireEvent lost = reporter.events->all<LostFireEvent>().front();
  EXPECT_EQ(lost.fire_key, "job@2026-01-01T00:01:00Z");
  EXPECT_EQ(lost.replica_id, "replica-1");
  EXPECT_TRUE(reporter.logged("fire job@2026-01-01T00:01:00Z lost: its runner, replica replica-1 on host-1"));
  // The reporter's ledger writer records the loss on the ledger's thread.
  ASSERT_TRUE(ledger_reaches(fleet.state(), "job", [](const std::vector<FireRecord>& records) {
    return !records.empty() && records.front().fate == FireFate::lost;
  }));
  const FireRecord lost_record = ledger_of(fleet.state(), "job").front();
  EXPECT_EQ(lost_record.replica_id, "replica-1");
  EXPECT_EQ(lost_record.fence, lost.fence);
  // Derived from the event: its expiry on the store's clock, and who reported it.
  // A record lives three heartbeats (15 s) past its last beat.
  EXPECT_GE(lost.expired_at, lost.last_beat + 15s);
  EXPECT_LE(lost.expired_at, lost.last_beat + 16s);
  EXPECT_NE(lost_record.reason.find("record expired " + format_rfc3339(lost.expired_at)), std::string::npos)
      << lost_record.reason;
  EXPECT_NE(lost_record.reason.find("; reported by replica-"), std::string::npos) << lost_record.reason;
  EXPECT_EQ(lost_record.reason.find("reported by replica-1"), std::string::npos) << "not by the runner";
  // A second look reports nothing more: the record is gone.
  h.settle(3 * waiters_per_replica);
  h.clock->advance(5s);
  h.settle(3 * waiters_per_replica);
  EXPECT_EQ(other.events->count<LostFireEvent>() + third.events->count<LostFireEvent>(), 1u);
  // The runner comes back and finishes: the run's end outranks the loss.
  dark->failing = false;
  blocking.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(runner) == 1; }));
  ASSERT_TRUE(fleet.stop(runner));
  ASSERT_TRUE(Harness::eventually([&] {
    const LedgerRead read = fleet.state().read_fires("job", 10);
    return !read.records.empty() && read.records.front().fate == FireFate::succeeded;
  }));
}

// The documented bound for a runner cut off alone (docs/fleet-state.md,
// "Lost runs"): its record lives 3 heartbeats (15 s) from its last beat,
// which may be up to a heartbeat old when the cut starts, and it announces
// again within a fifth of a heartbeat (1 s) of the cut's end: a cut shorter
// than 2 heartbeats less that second (9 s) never loses its runs, whatever
// the phase. 8 s here: nothing reported, the run still listed.
TEST(SchedulerRegistry, ARunnerCutOffForLessThanTheBoundKeepsItsRuns) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;
  auto cut = std::make_shared<FailingRegistry>(fleet.shared_state());
  LongJob blocking;
  Replica& runner = fleet.add("10m", "* * * * *", blocking.job(), cut);
  Replica& other = fleet.add("10m", "0 0 1 1 *");
  Replica& third = fleet.add("10m", "0 0 1 1 *");
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return blocking.starts.load() > 0; }));
  for (int phase = 0; phase < 5; ++phase) {  // cuts starting at each second of the heartbeat
    for (int i = 0; i < 8; ++i) {
      cut->failing = true;
      h.settle(3 * waiters_per_replica);
      h.clock->advance(1s);
    }
    cut->failing = false;
    for (int i = 0; i < 6 + phase; ++i) {  // back, and on to the next phase
      h.settle(3 * waiters_per_replica);
      h.clock->advance(1s);
    }
  }
  h.settle(3 * waiters_per_replica);
  EXPECT_EQ(other.events->count<LostFireEvent>() + third.events->count<LostFireEvent>(), 0u);
  EXPECT_GE(oldest_runs(fleet, h), 1u) << "the runs (one a minute) are still listed";
  blocking.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(runner) >= 1; }));
}

// A store down for longer than a record lives (every replica cut off
// together: an outage, a failover) expires every record on the store's
// clock. The first replica to announce after it used to drop the others'
// records and report their live runs lost; a replica that lost touch with
// the store now keeps the records that expired until it has been in touch
// for a record's life, by when every live replica has announced again.
TEST(SchedulerRegistry, AStoreOutageReportsNoLiveRunLost) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;  // records live 15 s
  auto store = std::make_shared<FailingRegistry>(fleet.shared_state());
  // The runner's way to the store comes back two seconds after the others'.
  auto runner_store = std::make_shared<FailingRegistry>(fleet.shared_state());
  LongJob blocking;
  Replica& runner = fleet.add("10m", "* * * * *", blocking.job(), runner_store);
  Replica& other = fleet.add("10m", "0 0 1 1 *", {}, store);
  Replica& third = fleet.add("10m", "0 0 1 1 *", {}, store);
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return blocking.starts.load() > 0; }));
  h.settle(3 * waiters_per_replica);
  h.clock->advance(1s);
  ASSERT_TRUE(Harness::eventually([&] {
    const RegistryRead read = fleet.state().read_replicas(h.clock->now());
    return !read.replicas.empty() && read.replicas.front().replica.runs.size() == 1;
  }));
  store->failing = runner_store->failing = true;  // 20 s without the store: every record expires
  for (int i = 0; i < 4; ++i) {
    h.settle(3 * waiters_per_replica);
    h.clock->advance(5s);
  }
  store->failing = false;
  for (int i = 0; i < 20; ++i) {  // back: a second at a time, for 20 s
    if (i == 2) runner_store->failing = false;
    h.settle(3 * waiters_per_replica);
    h.clock->advance(1s);
  }
  h.settle(3 * waiters_per_replica);
  EXPECT_EQ(other.events->count<LostFireEvent>() + third.events->count<LostFireEvent>(), 0u);
  EXPECT_EQ(fleet.state().read_replicas(h.clock->now()).replicas.size(), 3u);
  EXPECT_EQ(oldest_runs(fleet, h), 1u) << "the run is still listed";
  const LedgerRead ledger = fleet.state().read_fires("job", 10);
  ASSERT_EQ(ledger.status, LedgerRead::Status::found) << ledger.error;
  for (const auto& record : ledger.records) EXPECT_NE(record.fate, FireFate::lost) << record.fire_key;
  blocking.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(runner) == 1; }));
}

// One clock (docs/fleet-state.md#one-clock): a replica whose clock is
// ahead by more than a record lives decides on the store's clock, so it
// drops no live record, reports no live run lost and runs nothing again.
TEST(SchedulerRegistry, AReplicaWhoseClockIsAheadReportsNoLiveRunLost) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;  // records live 15 s
  LongJob blocking;
  Replica& runner = fleet.add("10m", "* * * * *", blocking.job(), nullptr, RecoverPolicy::rerun);
  fleet.clock_of_next = std::make_shared<OffsetClock>(h.clock, 16s);
  Replica& ahead = fleet.add("10m", "0 0 1 1 *", {}, nullptr, RecoverPolicy::rerun);
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return blocking.starts.load() > 0; }));
  h.settle(2 * waiters_per_replica);
  h.clock->advance(1s);  // listed
  ASSERT_TRUE(Harness::eventually([&] {
    const RegistryRead read = fleet.state().read_replicas(h.clock->now());
    return !read.replicas.empty() && read.replicas.front().replica.runs.size() == 1;
  }));
  for (int i = 0; i < 6; ++i) {  // 30 s: six announcements of each
    h.settle(2 * waiters_per_replica);
    h.clock->advance(5s);
  }
  h.settle(2 * waiters_per_replica);
  EXPECT_EQ(ahead.events->count<LostFireEvent>() + runner.events->count<LostFireEvent>(), 0u);
  EXPECT_FALSE(ahead.logged("lost: its runner")) << [&] {
    std::lock_guard guard(ahead.mutex);
    std::string lines;
    for (const auto& m : ahead.messages) lines += m + "\n";
    return lines;
  }();
  const RegistryRead read = fleet.state().read_replicas(h.clock->now());
  ASSERT_EQ(read.replicas.size(), 2u) << "both live on the store's clock";
  EXPECT_EQ(read.replicas.front().replica.runs.size(), 1u);
  const LedgerRead ledger = fleet.state().read_fires("job", 10);
  ASSERT_EQ(ledger.status, LedgerRead::Status::found) << ledger.error;
  for (const auto& record : ledger.records) EXPECT_NE(record.fate, FireFate::lost) << record.fire_key;
  EXPECT_EQ(ahead.events->count<JobStartedEvent>(), 0u) << "nothing run again";
  blocking.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(runner) == 1; }));
}

// With recover=rerun, the replica that reports the loss runs the fire
// again: claimed under its own key (a new fence), told the lost run's
// fence, once (recover_max 1).
TEST(SchedulerRegistry, ALostRunIsRunAgainOnceWithRecoverRerun) {
  Harness h;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;
  auto dark = std::make_shared<FailingRegistry>(fleet.shared_state());
  // Shared with the job, which may still read it after the test's locals
  // are gone (they go before the fleet stops).
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto lost_fence = std::make_shared<std::atomic<std::uint64_t>>(0);
  struct Release {
    std::shared_ptr<std::atomic<bool>> flag;
    ~Release() { *flag = true; }  // whatever fails, the job ends and the fleet stops
  } releaser{release};
  Replica& runner = fleet.add("10m", "* * * * *", [release, lost_fence](const FireContext& c, std::stop_token) {
    *lost_fence = c.fence;
    while (!*release) std::this_thread::sleep_for(1ms);
  }, dark, RecoverPolicy::rerun);
  std::mutex mutex;
  std::vector<FireContext> reruns;
  auto record = [&](const FireContext& c, std::stop_token) {
    std::lock_guard guard(mutex);
    reruns.push_back(c);
  };
  Replica& second = fleet.add("10m", "0 0 1 1 *", record, nullptr, RecoverPolicy::rerun);
  Replica& third = fleet.add("10m", "0 0 1 1 *", record, nullptr, RecoverPolicy::rerun);
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return lost_fence->load() != 0; }));
  h.settle(3 * waiters_per_replica);
  h.clock->advance(1s);  // listed
  ASSERT_TRUE(Harness::eventually([&] {
    const RegistryRead read = fleet.state().read_replicas(h.clock->now());
    return !read.replicas.empty() && read.replicas.front().replica.runs.size() == 1;
  }));
  dark->failing = true;
  for (int i = 0; i < 6; ++i) {  // 30 s: lost at 1:16 at the latest, re-run at once
    h.settle(3 * waiters_per_replica);
    h.clock->advance(5s);
  }
  ASSERT_TRUE(Harness::eventually([&] {
    std::lock_guard guard(mutex);
    return reruns.size() == 1;
  })) << [&] {
    std::string lines;
    for (Replica* r : {&second, &third}) {
      std::lock_guard guard(r->mutex);
      for (const auto& m : r->messages) lines += m + "\n";
    }
    return lines;
  }();
  h.settle(3 * waiters_per_replica);
  {
    std::lock_guard guard(mutex);
    const FireContext& rerun = reruns.front();
    EXPECT_EQ(rerun.fire_key, "job@2026-01-01T00:01:00Z") << "the same fire";
    EXPECT_EQ(rerun.recovery, 1);
    EXPECT_EQ(rerun.recovered_fence, lost_fence->load());
    EXPECT_GT(rerun.fence, lost_fence->load()) << "a new claim: a new fence";
    EXPECT_FALSE(rerun.manual);
  }
  // The re-run's end is the newest record; the loss stays beside it, each
  // under its own key (written by the replicas' ledger writers, off their
  // threads).
  EXPECT_TRUE(ledger_reaches(fleet.state(), "job", [](const std::vector<FireRecord>& records) {
    return records.size() >= 2 && records[0].fate == FireFate::succeeded && records[1].fate == FireFate::lost;
  }));
  const std::vector<FireRecord> records = ledger_of(fleet.state(), "job");
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(records[0].fire_key, "job@2026-01-01T00:01:00Z#recover1");
  EXPECT_EQ(records[1].fire_key, "job@2026-01-01T00:01:00Z");
  *release = true;
  ASSERT_TRUE(fleet.stop(runner));
  std::lock_guard guard(mutex);
  EXPECT_EQ(reruns.size(), 1u);
}


/// Releases the job however the test ends, so that the replicas can stop.
struct ReleaseOnExit {
  std::atomic<bool>& flag;
  ~ReleaseOnExit() { flag = true; }
};

std::size_t overlap_skips(Replica& r, std::string_view part) {
  const auto skips = r.events->all<SkippedFireEvent>();
  return static_cast<std::size_t>(std::count_if(skips.begin(), skips.end(), [&](const SkippedFireEvent& e) {
    return e.reason == SkipReason::overlap && e.error.find(part) != std::string::npos;
  }));
}

/// A replica's skips and log lines, for a failure's message.
std::string describe(Replica& r) {
  std::string out = "\n-- a replica:";
  for (const auto& e : r.events->all<SkippedFireEvent>()) {
    out += fmt::format("\n skipped {} ({}): {}", e.fire_key, to_string(e.reason), e.error);
  }
  std::lock_guard guard(r.mutex);
  for (const auto& m : r.messages) out += "\n log: " + m;
  return out;
}

// overlap=skip across the fleet: while one replica runs the job, the fire
// another replica claimed is skipped, naming where the job runs; once the
// run ends, the next fire runs.
TEST(SchedulerRegistry, OverlapSkipHoldsAcrossReplicas) {
  Harness h;
  LongJob job;  // outlives the replicas, which end its runs
  RegistryFleet fleet(h);
  fleet.overlap = OverlapPolicy::skip;
  const ReleaseOnExit releaser{job.release};
  Replica& a = fleet.add("10m", "* * * * *", job.job());
  Replica& b = fleet.add("10m", "* * * * *", job.job());
  fleet.settle();
  h.clock->advance(60s);  // 0:01: one of them runs it, and goes on
  ASSERT_TRUE(Harness::eventually([&] { return job.starts == 1; }));
  // And the other is done with its fire (refused the claim): until then it
  // holds its own overlap slot, and would skip 0:02 as its own overlap (a
  // worker is no clock waiter: settle() does not wait for it).
  ASSERT_TRUE(Harness::eventually([&] {
    return a.events->count<SkippedFireEvent>() + b.events->count<SkippedFireEvent>() == 1;
  })) << describe(a) << describe(b);
  for (int minute = 2; minute <= 3; ++minute) {
    fleet.settle();
    h.clock->advance(60s);  // the runner skips it before its claim, the other after
    ASSERT_TRUE(Harness::eventually([&] {
      return overlap_skips(a, "still goes on replica") + overlap_skips(b, "still goes on replica") ==
             static_cast<std::size_t>(minute - 1);
    })) << "minute " << minute << describe(a) << describe(b);
  }
  fleet.settle();
  EXPECT_EQ(job.starts, 1);
  job.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(a) + completed(b) == 1; }));
  const RegistryRead read = fleet.state().read_replicas(h.clock->now());
  for (const auto& record : read.replicas) EXPECT_TRUE(record.replica.runs.empty()) << "unlisted at its end";
  fleet.settle();
  h.clock->advance(60s);  // 0:04: free again
  ASSERT_TRUE(Harness::eventually([&] { return completed(a) + completed(b) == 2; }));
  EXPECT_EQ(job.starts, 2);
  EXPECT_EQ(job.most, 1);
}

// Fires of overlap=skip jobs due together are claimed in one batch when
// their overlap is checked fleet-wide; the job whose previous run still
// goes on here is skipped before the claim, left to the other replicas.
TEST(SchedulerRegistry, SkipJobsDueTogetherAreClaimedInOneBatch) {
  class Recorder final : public Claimer {
   public:
    explicit Recorder(std::shared_ptr<Clock> clock) : inner(std::move(clock), 10min) {}
    ClaimResult claim(std::string_view key) override {
      ++alone;
      return inner.claim(key);
    }
    std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override {
      batched += keys.size();
      return inner.claim_batch(keys);
    }
    MemoryClaimer inner;
    std::atomic<std::size_t> alone{0}, batched{0};
  };
  Harness h;
  LongJob job;
  const ReleaseOnExit releaser{job.release};
  auto claimer = std::make_shared<Recorder>(h.clock);
  auto options = h.options();
  options.claimer = claimer;
  options.fleet.state = std::make_shared<MemoryFleetState>(h.clock);
  options.fleet.registry_heartbeat_interval = 50s;
  options.fleet.replica.settings = {{"claim_ttl", "10m"}, {"mode", "claim"}};
  options.limits.max_concurrent = 64;
  Scheduler s(options);
  constexpr int jobs = 20;
  for (int i = 0; i < jobs; ++i) {
    s.add("* * * * *", i == 0 ? job.job() : Job([](const FireContext&, std::stop_token) {}),
          EntryOptions{.key = fmt::format("k{}", i), .overlap = OverlapPolicy::skip});
  }
  s.start();
  h.settle(waiters_per_replica);
  h.clock->advance(60s);  // 0:01: every job runs; k0 goes on
  ASSERT_TRUE(Harness::eventually([&] { return h.completed() == jobs - 1 && job.starts == 1; }));
  h.settle(waiters_per_replica);
  Harness::settle_runs(s, 1);  // the others' jobs free again, k0's still running
  h.settle(waiters_per_replica);
  h.clock->advance(60s);  // 0:02: k0's fire is skipped, unclaimed; the others are claimed together
  ASSERT_TRUE(Harness::eventually([&] { return h.completed() == 2 * (jobs - 1) && h.log->count<SkippedFireEvent>() == 1; }))
      << "completed " << h.completed() << ", skipped " << h.log->count<SkippedFireEvent>() << ", cancelled "
      << h.log->count<CancelledFireEvent>() << ", starts " << job.starts << [&] {
           std::string text;
           for (const auto& skip : h.log->all<SkippedFireEvent>())
             text += fmt::format("; {} {} {}", skip.fire_key, static_cast<int>(skip.reason), skip.error);
           return text;
         }();
  const auto skips = h.log->all<SkippedFireEvent>();
  EXPECT_EQ(skips.front().reason, SkipReason::overlap);
  EXPECT_TRUE(skips.front().fire_key.starts_with("k0@")) << skips.front().fire_key;
  EXPECT_EQ(job.starts, 1);
  EXPECT_EQ(claimer->batched + claimer->alone, 2u * jobs - 1);
  // The loop queues due fires together: a handful of batches, not a claim per fire.
  EXPECT_LE(claimer->alone, 4u);
  job.release = true;
  EXPECT_TRUE(s.stop(h.soon()));
}

/// 0:01 one of `a` and `b` runs the job; 0:02 the runner waits before
/// its claim (locally), the other claims, then waits on the clock for it.
void until_one_waits(Harness& h, RegistryFleet& fleet, LongJob& job, Replica& a, Replica& b) {
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return job.starts == 1; }));
  // The other replica's fire of 0:01 decided (claimed elsewhere): else it
  // could reach its overlap check after the runner's fire of 0:02. Its
  // loop has queued it once settled.
  fleet.settle();
  fleet.settle_runs(1);
  fleet.settle();
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return a.logged("waits (overlap=queue)") || b.logged("waits (overlap=queue)"); }));
}

// overlap=queue across the fleet: the fire another replica claimed waits
// for the run elsewhere to end, then runs; never two at once.
TEST(SchedulerRegistry, OverlapQueueWaitsForTheRunOnAnotherReplica) {
  Harness h;
  LongJob job;
  RegistryFleet fleet(h);
  fleet.overlap = OverlapPolicy::queue;
  const ReleaseOnExit releaser{job.release};
  Replica& a = fleet.add("10m", "* * * * *", job.job());
  Replica& b = fleet.add("10m", "* * * * *", job.job());
  ASSERT_NO_FATAL_FAILURE(until_one_waits(h, fleet, job, a, b));
  h.settle(2 * waiters_per_replica + 1);
  h.clock->advance(1s);
  h.settle(2 * waiters_per_replica + 1);
  EXPECT_EQ(job.starts, 1) << "still waiting";
  job.release = true;
  ASSERT_TRUE(Harness::eventually([&] { return completed(a) + completed(b) == 1; }));
  h.settle(2 * waiters_per_replica + 1);
  h.clock->advance(1s);  // its next look
  ASSERT_TRUE(Harness::eventually([&] { return completed(a) + completed(b) == 2; }));
  EXPECT_EQ(job.starts, 2);
  EXPECT_EQ(job.most, 1);
  EXPECT_TRUE(a.logged("starts: the previous run of its job ended") ||
              b.logged("starts: the previous run of its job ended"));
}

// A fire waiting for a run elsewhere (overlap=queue) is cancelled, claimed,
// when its replica stops: the stop does not wait for the other run.
TEST(SchedulerRegistry, AStopEndsAQueuedWaitForARunElsewhere) {
  Harness h;
  LongJob job;
  RegistryFleet fleet(h);
  fleet.overlap = OverlapPolicy::queue;
  const ReleaseOnExit releaser{job.release};
  Replica& a = fleet.add("10m", "* * * * *", job.job());
  Replica& b = fleet.add("10m", "* * * * *", job.job());
  ASSERT_NO_FATAL_FAILURE(until_one_waits(h, fleet, job, a, b));
  Replica& waiter = a.logged("waits (overlap=queue)") ? a : b;
  ASSERT_TRUE(fleet.stop(waiter));
  const auto cancelled = waiter.events->all<CancelledFireEvent>();
  ASSERT_EQ(cancelled.size(), 1u) << [&] {
    std::string text = fmt::format("waiter {}", &waiter == &a ? "a" : "b");
    for (const auto& cancel : cancelled)
      text += fmt::format("; {} {} claimed {}", fire_key("k", cancel.scheduled_at), cancel.cause, cancel.claimed);
    return text;
  }();
  EXPECT_NE(cancelled.front().cause.find("elsewhere in the fleet"), std::string::npos) << cancelled.front().cause;
  EXPECT_TRUE(cancelled.front().claimed);
  EXPECT_EQ(job.starts, 1);
}

// A runner that goes dark blocks its job for at most its record's life
// (3 heartbeats): then the run is reported lost and the job is free.
TEST(SchedulerRegistry, ADarkRunnerBlocksItsJobAtMostItsRecordsLife) {
  Harness h;
  LongJob job;
  RegistryFleet fleet(h);
  fleet.heartbeat = 5s;  // records live 15 s
  fleet.overlap = OverlapPolicy::skip;
  auto dark = std::make_shared<FailingRegistry>(fleet.shared_state());
  const ReleaseOnExit releaser{job.release};
  fleet.add("10m", "* * * * *", job.job(), dark);
  h.settle(waiters_per_replica);
  h.clock->advance(60s);  // 0:01 runs on the first replica, the only one yet
  ASSERT_TRUE(Harness::eventually([&] { return job.starts == 1; }));
  Replica& other = fleet.add("10m", "* * * * *", job.job());
  // 0:01:30 the runner goes dark; its record, last written at 0:01:30 at the
  // latest, expires by 0:01:45; the fire at 0:02 runs on the other one.
  auto step = [&](int times) {
    for (int i = 0; i < times; ++i) {
      h.settle(2 * waiters_per_replica);
      h.clock->advance(5s);
    }
  };
  step(6);
  dark->failing = true;
  step(6);
  ASSERT_TRUE(Harness::eventually([&] { return job.starts == 2; })) << completed(other);
  EXPECT_EQ(other.events->count<LostFireEvent>(), 1u);
  EXPECT_EQ(job.most, 2) << "the bound: a dark runner that still runs overlaps once its record expired";
}

// A fleet state that counts the registry's writes and, while `gate` is
// closed, holds the first one it is asked for.
class GatedRegistry final : public ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    if (which == Document::registry) {
      std::unique_lock lock(mutex);
      ++writes;
      held = held || closed;
      cv.notify_all();
      cv.wait(lock, [&] { return !closed; });
    }
    return ForwardingFleetState::replace_document(which, seen, text, keep_for);
  }
  void open() {
    std::lock_guard guard(mutex);
    closed = false;
    cv.notify_all();
  }
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = false, held = false;
  int writes = 0;
};

// Ten runs of jobs under the fleet-wide overlap rule end together: their
// unlisting is one group commit, not ten serial registry writes (on a busy
// host those made each run's end known up to a second late, and the next
// fire was skipped overlap). The first end's write is held until every job
// returned, so the others queue behind it; each must still be unlisted.
TEST(SchedulerRegistry, RunsEndingTogetherShareOneAnnouncement) {
  Harness h;
  auto gated = std::make_shared<GatedRegistry>(std::make_shared<MemoryFleetState>(h.clock));
  LongJob job;
  const ReleaseOnExit releaser{job.release};
  auto events = std::make_shared<EventLog>();
  auto options = h.options();
  options.fleet.state = gated;
  options.claimer = std::make_shared<MemoryClaimer>(h.clock, 10min);
  options.recorder = events;
  options.fleet.replica_id = "replica-1";
  options.fleet.registry_heartbeat_interval = 50s;
  options.limits.max_concurrent = 16;
  Scheduler s(options);
  for (int i = 0; i < 10; ++i) {
    s.add("* * * * *", job.job(), EntryOptions{.key = "job" + std::to_string(i), .overlap = OverlapPolicy::skip});
  }
  s.start();
  h.settle(Harness::idle_waiters);
  h.clock->advance(60s);
  ASSERT_TRUE(Harness::eventually([&] { return job.starts == 10; }));
  int before = 0;
  {
    std::lock_guard guard(gated->mutex);
    gated->closed = true;
    before = gated->writes;
  }
  job.release = true;
  {
    std::unique_lock lock(gated->mutex);
    ASSERT_TRUE(gated->cv.wait_for(lock, 10s, [&] { return gated->held; }));
  }
  ASSERT_TRUE(Harness::eventually([&] { return job.running == 0; }));  // every job returned
  gated->open();
  ASSERT_TRUE(Harness::eventually([&] { return events->count<JobCompletedEvent>() == 10; }));
  {
    std::lock_guard guard(gated->mutex);
    // One write held, one for the runs that queued behind it (a run whose
    // thread reached the queue late on a busy host may add its own): ten
    // without the group commit.
    EXPECT_LE(gated->writes - before, 4) << "registry writes for ten run ends";
  }
  const RegistryRead read = gated->read_replicas(h.clock->now());
  ASSERT_EQ(read.replicas.size(), 1u);
  EXPECT_TRUE(read.replicas[0].replica.runs.empty()) << "every run unlisted at its end";
  EXPECT_TRUE(s.stop(h.soon()));
}

}  // namespace
}  // namespace fleetcron::test
