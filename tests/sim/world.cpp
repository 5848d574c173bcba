// The simulated world: time, the store model, replicas and their faults.
// See world.h for how it stays deterministic.
#include "sim/world.h"
#include "fleetcron/backend/record_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <deque>
#include <utility>
#include <random>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace fleetcron::sim {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_text(std::string_view text) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return h;
}

/// A uniform number in [0, 1) that depends only on its arguments.
template <class... T>
double chance(T... parts) {
  std::uint64_t h = 0;
  ((h = mix(h ^ static_cast<std::uint64_t>(parts))), ...);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

std::int64_t to_us(Instant t) { return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count(); }

}  // namespace

Instant sim_epoch() { return parse_rfc3339("2026-03-01T00:00:00Z"); }

std::string sim_replica_id(int replica, int incarnation) { return fmt::format("r{}-i{}", replica, incarnation); }

const std::vector<SimJob>& sim_jobs() {
  static const std::vector<SimJob> jobs = [] {
    std::vector<SimJob> out;
    for (int i = 0; i < 10; ++i) out.push_back({fmt::format("every-second-{}", i), "* * * * * *", MissedFirePolicy::run_once});
    for (int i = 0; i < 4; ++i) out.push_back({fmt::format("every-5s-{}", i), "*/5 * * * * *", MissedFirePolicy::skip});
    out.push_back({"every-7s", "*/7 * * * * *", MissedFirePolicy::run_once});
    out.push_back({"every-10s-all", "*/10 * * * * *", MissedFirePolicy::run_all});
    out.push_back({"minutely-all", "0 * * * * *", MissedFirePolicy::run_all});
    out.push_back({"minutely-once", "30 * * * * *", MissedFirePolicy::run_once});
    out.push_back({"long-15s", "*/15 * * * * *", MissedFirePolicy::run_once, std::chrono::seconds{20}});
    out.push_back({"jittered-3s", "*/3 * * * * *", MissedFirePolicy::skip, std::chrono::seconds{1}, std::chrono::seconds{2}});
    return out;
  }();
  return jobs;
}

namespace {

class World;

// Each replica's worker threads. A claim batch holds at most this many
// fires (one worker reserved for each); when the fires waiting for the
// store hold every worker, the fires still queued behind them wait for the
// store too (see quiescent_locked()).
constexpr std::size_t workers_per_replica = 8;

enum class State { running, paused, stopping, dead };

struct Request {
  int incarnation = 0;
  std::vector<std::string> keys;
  Instant sent_wall;
  std::vector<ClaimResult> results;
  nanoseconds deliver_at{0};
  bool done = false;
  std::condition_variable cv;
};

struct Incarnation {
  int id = 0;
  int replica = 0;
  std::shared_ptr<class ReplicaClock> clock;
  std::unique_ptr<Scheduler> scheduler;  // world thread only
  State state = State::running;
  nanoseconds steady_delta{0};  // replica steady - world time, while running
  nanoseconds paused_at{0};
  // Accounting for quiescence (world mutex).
  std::uint64_t emitted = 0;
  std::uint64_t terminated = 0;
  std::uint64_t parked = 0;
  std::map<std::string, Instant> planned;       // entry key -> next instant
  std::map<std::string, Instant> span_from;     // entry key -> first instant
  std::map<std::string, std::uint64_t> missed_runs;  // from a MissedFireEvent, until its ScheduledEvent
  std::vector<std::shared_ptr<Request>> in_flight;    // processed, answer not delivered yet
  // The elector's local view.
  bool leader = false;
  std::uint64_t term = 0;
  bool fresh_term = false;  // demoted: its next lease is a new term, as the Redis elector asks
  Clock::SteadyTime local_deadline{};
  std::function<void(std::uint64_t)> lost;
  std::uint64_t campaigns = 0;
  bool campaign_due_on_resume = false;
  std::function<bool()> fit;  // Elector::set_liveness()
  std::uint64_t fence_seen = 0;  // the highest fence counter its claimer saw
  // Its scheduler's threads that wait on its clock when idle: the loop and
  // the timeout watchdog, and with a fleet state the catch-up and upkeep
  // threads (src/core/scheduler/lifecycle.cpp).
  std::uint64_t threads_on_clock = 2;
  // Its fleet-state calls so far, by kind (world mutex): their faults are
  // a pure function of (seed, incarnation, kind, count).
  std::array<std::uint64_t, 3> fleet_calls{};
};

/// What the store does with one fleet-state call: refuses it (`apply`
/// false, `error` says why), or applies it and answers `error` (empty: the
/// answer arrives).
struct FleetCall {
  bool apply = true;
  std::string error;
};
enum class FleetCallKind : std::size_t { read = 0, write = 1, document = 2 };

struct Replica {
  nanoseconds initial_offset{0};  // its wall clock minus the store's, at the start
  double drift_ppm = 0;
  /// Its wall clock minus the store's at simulated time `t`.
  nanoseconds offset(nanoseconds t) const {
    return initial_offset + nanoseconds{static_cast<std::int64_t>(static_cast<double>(t.count()) * drift_ppm * 1e-6)};
  }
  std::map<std::string, Instant> last_run;  // its persisted record
  std::shared_ptr<Incarnation> current;
};

/// A replica's clock: a VirtualClock whose wall time drifts by `drift_ppm`
/// (computed from its own steady time, so drifting wakes nobody), and that
/// tells the world when a waiter has woken, so it re-checks quiescence.
class ReplicaClock final : public Clock {
 public:
  ReplicaClock(Instant start, double drift_ppm, World& world)
      : inner_(start), steady_start_(inner_.steady_now()), drift_ppm_(drift_ppm), world_(world) {}
  Instant now() const noexcept override {
    const auto elapsed = static_cast<double>((inner_.steady_now() - steady_start_).count());
    return inner_.now() + nanoseconds{static_cast<std::int64_t>(elapsed * drift_ppm_ * 1e-6)};
  }
  SteadyTime steady_now() const noexcept override { return inner_.steady_now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override;
  VirtualClock& inner() { return inner_; }

 private:
  VirtualClock inner_;
  const SteadyTime steady_start_;
  const double drift_ppm_;
  World& world_;
};

class World {
 public:
  explicit World(const SimOptions& options);
  Outcome run();

  // Called from scheduler threads.
  void poke();
  nanoseconds dedup_window() const {
    return options_.dedup_window.value_or(options_.claim_ttl - 2 * options_.max_clock_skew);
  }
  std::vector<ClaimResult> claim(const std::shared_ptr<Incarnation>& inc, std::span<const std::string> keys);
  Leadership is_leader(const std::shared_ptr<Incarnation>& inc);
  void resign(const std::shared_ptr<Incarnation>& inc);
  void set_lost(const std::shared_ptr<Incarnation>& inc, std::function<void(std::uint64_t)> lost);
  void set_fit(const std::shared_ptr<Incarnation>& inc, std::function<bool()> fit);
  static void run_for(Clock& clock, nanoseconds duration, std::stop_token stop);
  void record_event(const std::shared_ptr<Incarnation>& inc, const Event& event);
  void record_run(const std::shared_ptr<Incarnation>& inc, const FireContext& context);
  /// Whether the incarnation was killed (SIGKILL): its store calls fail.
  bool killed(const Incarnation& inc) const {
    std::lock_guard guard(mutex_);
    return inc.state == State::dead;
  }
  /// The store's verdict on one fleet-state call of `inc`.
  FleetCall fleet_call(Incarnation& inc, FleetCallKind kind);
  /// The fleet-wide documents as the store keeps them.
  FleetState::StoredDocument load_document(FleetState::DocumentId which);
  FleetState::DocumentReplace replace_document(FleetState::DocumentId which, const FleetState::StoredDocument& seen,
                                               const std::string& text);
  /// A replica's log line: what it says of triggers is kept.
  void note_log(const std::shared_ptr<Incarnation>& inc, std::string_view line);

 private:
  struct Timed {
    nanoseconds at;
    std::uint64_t seq;
    std::function<void()> action;
    friend bool operator<(const Timed& a, const Timed& b) { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  void at(nanoseconds when, std::function<void()> action) { events_.push(Timed{when, next_seq_++, std::move(action)}); }
  nanoseconds exponential(std::chrono::seconds mean);
  Instant store_wall() const { return sim_epoch() + now_; }
  void note(std::string text) { outcome_.faults.emplace_back(now_, std::move(text)); }
  void key_record(const std::string& key, const Incarnation& inc, std::string what) {
    outcome_.by_key[key].push_back(KeyRecord{now_, inc.replica, inc.id, std::move(what)});
  }

  void start_incarnation(int replica, bool with_record);
  void give_fleet_state(SchedulerOptions& scheduler, const std::shared_ptr<Incarnation>& inc);
  void read_ledger();
  bool kill(int replica, bool graceful);  // false if it was not running
  void pause(int replica, nanoseconds length);
  void resume(int replica);
  void close_spans(Incarnation& inc);
  void schedule_faults(int replica);
  void schedule_store_faults();
  void roll_back_store(nanoseconds lost);
  /// The documents go back by `lost` (nanoseconds::max(): all gone), then
  /// the catalogue is looked at two heartbeats later (world mutex).
  void lose_documents_locked(nanoseconds lost);
  void probe_catalogue(nanoseconds wiped, std::vector<int> running_at_wipe);
  void schedule_triggers();
  void send_trigger(std::size_t index, int attempt);
  void wait_quiescent();
  bool quiescent_locked() const;
  /// Quiescent with fires queued behind workers that all wait for the store.
  bool saturated_locked() const;
  void process_round();
  void deliver_locked(const std::shared_ptr<Request>& request);
  /// Completes a claim request (its results set) and unblocks its worker.
  static void answer_locked(Incarnation& inc, Request& request);
  void campaign(const std::shared_ptr<Incarnation>& inc);
  void demote_if_expired(const std::shared_ptr<Incarnation>& inc);
  void demote_locked(Incarnation& inc, std::vector<std::function<void()>>& calls);
  Incarnation* find(int id) { auto it = by_id_.find(id); return it == by_id_.end() ? nullptr : it->second.get(); }

  const SimOptions options_;
  std::mt19937_64 random_;
  nanoseconds now_{0};
  nanoseconds end_{0};
  std::uint64_t next_seq_ = 0;
  std::priority_queue<Timed> events_;
  std::vector<Replica> replicas_;
  std::unordered_map<int, std::shared_ptr<Incarnation>> by_id_;
  int next_incarnation_ = 1;
  std::uint64_t round_ = 0;

  // The store (world mutex).
  struct StoredClaim {
    nanoseconds expires;
    std::uint64_t fence;
    nanoseconds granted;
  };
  // The reset epoch record and the server identity it names (Redis's
  // master_replid, which changes on every restart and failover).
  std::optional<Instant> store_epoch_;
  std::uint64_t store_identity_ = 1;
  std::uint64_t epoch_identity_ = 0;
  std::unordered_map<std::string, StoredClaim> claims_;
  std::deque<std::pair<nanoseconds, std::string>> claim_expiry_;
  std::uint64_t fence_counter_ = 0;
  int lease_holder_ = 0;  // incarnation id; 0 = none
  nanoseconds lease_expires_{0};
  std::uint64_t term_counter_ = 0;
  std::uint64_t lease_term_ = 0;
  nanoseconds outage_until_{-1};
  // The fleet state (SimOptions::ledger), on the store's clock.
  std::shared_ptr<VirtualClock> store_clock_;
  std::shared_ptr<MemoryFleetState> fleet_state_;
  // The documents (controls, registry, catalogue), with each write of the
  // last few seconds and what it replaced, to roll them back.
  struct StoredDocument {
    std::optional<std::string> text;
    std::uint64_t revision = 0;
  };
  std::array<StoredDocument, FleetState::document_slots> documents_;  // by FleetState::slot()
  std::uint64_t document_revisions_ = 0;
  struct DocumentWrite {
    nanoseconds at;
    std::size_t which;
    StoredDocument before;
  };
  std::deque<DocumentWrite> document_writes_;
  // The operator who asks for triggers: an incarnation of no replica, never killed.
  std::shared_ptr<Incarnation> operator_;
  std::shared_ptr<FleetState> operator_state_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<Request>> pending_;
  Outcome outcome_;
};

void ReplicaClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) {
  inner_.wait_until(cv, lock, deadline);
  world_.poke();
}

class SimClaimer final : public Claimer {
 public:
  SimClaimer(World& world, std::shared_ptr<Incarnation> inc) : world_(world), inc_(std::move(inc)) {}
  ClaimResult claim(std::string_view fire_key) override {
    const std::string key(fire_key);
    return world_.claim(inc_, std::span<const std::string>(&key, 1)).front();
  }
  std::vector<ClaimResult> claim_batch(std::span<const std::string> keys) override { return world_.claim(inc_, keys); }
  nanoseconds dedup_window() const override { return world_.dedup_window(); }

 private:
  World& world_;
  std::shared_ptr<Incarnation> inc_;
};

class SimElector final : public Elector {
 public:
  SimElector(World& world, std::shared_ptr<Incarnation> inc) : world_(world), inc_(std::move(inc)) {}
  Leadership is_leader() override { return world_.is_leader(inc_); }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override { world_.set_lost(inc_, std::move(lost)); }
  void resign() override { world_.resign(inc_); }
  // As the Redis keep-alive: while unfit, free a lease it holds and do
  // not campaign (the scheduler's step-down after failing claims).
  void set_liveness(std::function<bool()> fit) override { world_.set_fit(inc_, std::move(fit)); }

 private:
  World& world_;
  std::shared_ptr<Incarnation> inc_;
};

/// One incarnation's way to the fleet state: the fleet's MemoryFleetState
/// (ledger, cursors, the store's clock) and the world's documents, through
/// the store's faults; from a kill (SIGKILL) on, every call fails, so its
/// ledger queue is lost and its registry record is left to expire.
class SimFleetState final : public FleetState {
 public:
  SimFleetState(World& world, std::shared_ptr<Incarnation> inc, std::shared_ptr<MemoryFleetState> store)
      : world_(world), inc_(std::move(inc)), store_(std::move(store)) {}
  CursorRead read_cursor(std::string_view job) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::read);
    if (!call.apply) return CursorRead{CursorRead::Status::error, std::nullopt, call.error};
    return store_->read_cursor(job);
  }
  CursorAdvance advance_cursor(std::string_view job, Instant instant, std::uint64_t digest, nanoseconds keep_for) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::write);
    if (!call.apply) return CursorAdvance{CursorAdvance::Status::error, std::nullopt, call.error};
    CursorAdvance answer = store_->advance_cursor(job, instant, digest, keep_for);
    return call.error.empty() ? answer : CursorAdvance{CursorAdvance::Status::error, std::nullopt, call.error};
  }
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant instant,
                              std::uint64_t digest, nanoseconds keep_for, std::string_view claimant) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::write);
    if (!call.apply) return CatchUpClaim{CatchUpClaim::Status::error, std::nullopt, call.error};
    CatchUpClaim answer = store_->claim_catch_up(job, seen, instant, digest, keep_for, claimant);
    return call.error.empty() ? answer : CatchUpClaim{CatchUpClaim::Status::error, std::nullopt, call.error};
  }
  std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::write);
    const std::vector<LedgerWriteResult> failed(writes.size(), {LedgerWriteResult::Status::error, call.error});
    if (!call.apply) return failed;
    std::vector<LedgerWriteResult> answer = store_->record_fires(writes);
    return call.error.empty() ? answer : failed;
  }
  LedgerRead read_fires(std::string_view job, std::size_t limit) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::read);
    if (!call.apply) return LedgerRead{LedgerRead::Status::error, {}, call.error};
    return store_->read_fires(job, limit);
  }
  StoredDocument load_document(DocumentId which) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::read);
    if (!call.apply) return StoredDocument{StoredDocument::Status::error, {}, 0, call.error};
    return world_.load_document(which);
  }
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   nanoseconds) override {
    const FleetCall call = world_.fleet_call(*inc_, FleetCallKind::document);
    if (!call.apply) return DocumentReplace{DocumentReplace::Status::error, call.error};
    const DocumentReplace answer = world_.replace_document(which, seen, text);
    return call.error.empty() ? answer : DocumentReplace{DocumentReplace::Status::error, call.error};
  }
  // The store's clock: the registry's beats and expiry are judged on it.
  std::optional<Instant> store_now() override {
    if (!world_.fleet_call(*inc_, FleetCallKind::read).apply) return std::nullopt;
    return store_->store_now();
  }

 private:
  World& world_;
  std::shared_ptr<Incarnation> inc_;
  std::shared_ptr<MemoryFleetState> store_;
};

class Recorder final : public Observer {
 public:
  Recorder(World& world, std::shared_ptr<Incarnation> inc) : world_(world), inc_(std::move(inc)) {}
  void on_event(const Event& event) override { world_.record_event(inc_, event); }

 private:
  World& world_;
  std::shared_ptr<Incarnation> inc_;
};

World::World(const SimOptions& options) : options_(options), random_(mix(options.seed)) {
  if (options_.replicas < 1 || options_.replicas > 16) throw std::invalid_argument("replicas must be 1..16");
  if (options_.ledger && options_.duration > std::chrono::hours{2}) {
    throw std::invalid_argument("with the ledger, the duration is at most 2 hours (a job's ledger keeps 10,000 records)");
  }
  end_ = options_.duration;
  if (options_.ledger) {
    store_clock_ = std::make_shared<VirtualClock>(sim_epoch());
    fleet_state_ = std::make_shared<MemoryFleetState>(store_clock_);
    operator_ = std::make_shared<Incarnation>();
    operator_->replica = -1;
    operator_state_ = std::make_shared<SimFleetState>(*this, operator_, fleet_state_);
  }
}

nanoseconds World::exponential(std::chrono::seconds mean) {
  std::exponential_distribution<double> pick(1.0 / static_cast<double>(mean.count()));
  return std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(pick(random_)));
}

void World::poke() {
  { std::lock_guard guard(mutex_); }
  changed_.notify_all();
}

// ---- scheduler-facing ---------------------------------------------------

FleetCall World::fleet_call(Incarnation& inc, FleetCallKind kind) {
  std::lock_guard guard(mutex_);
  if (inc.state == State::dead) return FleetCall{false, "process killed"};
  if (now_ < outage_until_) return FleetCall{false, "store unreachable (outage)"};
  const FaultPlan& f = options_.faults;
  const std::uint64_t n = inc.fleet_calls[static_cast<std::size_t>(kind)]++;
  const double roll = chance(options_.seed, inc.id, 100 + static_cast<int>(kind), n);
  if (roll < f.fleet_request_error) return FleetCall{false, "store request failed"};
  if (kind != FleetCallKind::read && roll < f.fleet_request_error + f.fleet_reply_lost) {
    return FleetCall{true, "store answer lost (timeout)"};
  }
  return FleetCall{};
}

FleetState::StoredDocument World::load_document(FleetState::DocumentId which) {
  std::lock_guard guard(mutex_);
  const StoredDocument& document = documents_.at(FleetState::slot(which));
  if (!document.text) return {FleetState::StoredDocument::Status::absent, {}, document.revision, {}};
  return {FleetState::StoredDocument::Status::found, *document.text, document.revision, {}};
}

FleetState::DocumentReplace World::replace_document(FleetState::DocumentId which, const FleetState::StoredDocument& seen,
                                                    const std::string& text) {
  std::lock_guard guard(mutex_);
  const auto index = FleetState::slot(which);
  StoredDocument& document = documents_.at(index);
  const bool present = seen.status == FleetState::StoredDocument::Status::found;
  if (seen.revision != document.revision || present != document.text.has_value()) {
    return {FleetState::DocumentReplace::Status::conflict, {}};
  }
  // Rollbacks undo at most 3 s of writes: older ones need not be kept.
  while (!document_writes_.empty() && document_writes_.front().at < now_ - 10s) document_writes_.pop_front();
  document_writes_.push_back(DocumentWrite{now_, index, document});
  document.text = text;
  document.revision = ++document_revisions_;
  return {FleetState::DocumentReplace::Status::written, {}};
}

void World::note_log(const std::shared_ptr<Incarnation>& inc, std::string_view line) {
  // FLEETCRON_SIM_LOG=1: every replica's log lines, to read with a replay.
  static const bool print = std::getenv("FLEETCRON_SIM_LOG") != nullptr;
  const bool kept = line.starts_with("ledger: ") || line.starts_with("replica registry: this replica's record was not") ||
                    line.find("trigger ") != std::string_view::npos;
  if (!print && !kept) return;  // most lines (every skip) take no lock
  std::lock_guard guard(mutex_);
  if (print) {
    std::fprintf(stderr, "%.3f i%d %.*s\n", static_cast<double>(now_.count()) / 1e9, inc->id, static_cast<int>(line.size()),
                 line.data());
  }
  // "ledger: queue full …", "ledger: N records dropped in all …", "ledger: stopped with N records not written".
  if (line.starts_with("ledger: ") &&
      (line.find("dropped") != std::string_view::npos || line.find("stopped with") != std::string_view::npos)) {
    outcome_.ledger_dropped[inc->id] = now_;
    return;
  }
  if (line.starts_with("replica registry: this replica's record was not removed")) {
    outcome_.record_left[inc->id] = now_;
    return;
  }
  const auto at = line.find("trigger ");
  if (at == std::string_view::npos) return;
  const std::string_view id = line.substr(at + 8, 16);
  std::string what;
  if (line.find("taken, running it here") != std::string_view::npos) what = "taken";
  else if (line.find("the take's answer was lost") != std::string_view::npos) what = "taken (answer lost)";
  else if (line.find("taken but not run") != std::string_view::npos) what = "not run";
  else if (line.find("came back after it was taken") != std::string_view::npos) what = "came back, dropped";
  else if (line.find("drop's answer was lost") != std::string_view::npos) what = "expired (drop's answer lost)";
  else if (line.find("no replica took it") != std::string_view::npos) what = "expired";
  else return;
  // A taken trigger is a fire this replica's workers run: time waits for it
  // as for a loop's fire (quiescent_locked()); one not run ends there.
  if (what == "taken") ++inc->emitted;
  if (what == "not run") ++inc->terminated;
  outcome_.trigger_logs.push_back(Outcome::TriggerLog{inc->id, std::string(id), std::move(what), now_});
}


std::vector<ClaimResult> World::claim(const std::shared_ptr<Incarnation>& inc, std::span<const std::string> keys) {
  auto request = std::make_shared<Request>();
  request->incarnation = inc->id;
  request->keys.assign(keys.begin(), keys.end());
  request->sent_wall = inc->clock->now();
  std::unique_lock lock(mutex_);
  if (inc->state == State::dead || inc->state == State::stopping) {
    return std::vector<ClaimResult>(keys.size(), ClaimResult::failed("process stopping"));
  }
  pending_.push_back(request);
  inc->parked += keys.size();
  changed_.notify_all();
  request->cv.wait(lock, [&] { return request->done; });  // whoever sets done unblocks us in the counts
  return request->results;
}

Leadership World::is_leader(const std::shared_ptr<Incarnation>& inc) {
  std::lock_guard guard(mutex_);
  if (inc->state != State::running) return Leadership::failed("process stopping");
  if (inc->leader && inc->clock->steady_now() < inc->local_deadline) return Leadership::leader(inc->term);
  return Leadership::follower();
}

void World::resign(const std::shared_ptr<Incarnation>& inc) {
  std::lock_guard guard(mutex_);
  if (inc->state != State::stopping) return;  // a killed process resigns nothing
  if (lease_holder_ == inc->id && now_ < lease_expires_ && now_ >= outage_until_) {
    lease_holder_ = 0;
    note(fmt::format("r{}/i{} resigns term {}", inc->replica, inc->id, lease_term_));
  }
  inc->leader = false;
}

void World::set_lost(const std::shared_ptr<Incarnation>& inc, std::function<void(std::uint64_t)> lost) {
  std::lock_guard guard(mutex_);
  inc->lost = std::move(lost);
}

void World::set_fit(const std::shared_ptr<Incarnation>& inc, std::function<bool()> fit) {
  std::lock_guard guard(mutex_);
  inc->fit = std::move(fit);
}

void World::record_event(const std::shared_ptr<Incarnation>& inc, const Event& event) {
  std::lock_guard guard(mutex_);
  Incarnation& me = *inc;
  if (const auto* e = std::get_if<ScheduledEvent>(&event)) {
    const std::string& key = e->entry->key;
    auto it = me.planned.find(key);
    if (it == me.planned.end()) {
      me.planned.emplace(key, e->next);
      me.span_from.emplace(key, e->next);
    } else {
      auto missed = me.missed_runs.find(key);
      if (missed != me.missed_runs.end()) {
        me.emitted += missed->second;
        me.missed_runs.erase(missed);
      } else {
        me.emitted += 1;
      }
      it->second = e->next;
    }
  } else if (const auto* missed = std::get_if<MissedFireEvent>(&event)) {
    me.missed_runs[missed->entry->key] = missed->runs;
    outcome_.missed.push_back(MissedRange{me.replica, me.id, missed->entry->key, missed->first_missed, missed->last_missed, missed->missed,
                                          missed->runs, missed->policy, now_});
  } else if (const auto* lost = std::get_if<LostFireEvent>(&event)) {
    outcome_.lost_reports.push_back(Outcome::LostReport{me.id, lost->replica_id, lost->fire_key, now_});
  } else if (std::get_if<JobCompletedEvent>(&event) != nullptr) {
    ++me.terminated;  // a manual run (a trigger's) too: counted when taken (note_log)
  } else if (const auto* skipped = std::get_if<SkippedFireEvent>(&event)) {
    ++me.terminated;
    key_record(skipped->fire_key, me,
               fmt::format("skip {}{}{}", to_string(skipped->reason), skipped->error.empty() ? "" : ": ", skipped->error));
  } else if (const auto* cancelled = std::get_if<CancelledFireEvent>(&event)) {
    ++me.terminated;
    key_record(fire_key(cancelled->entry->key, cancelled->scheduled_at), me,
               "cancelled: " + cancelled->cause + (cancelled->claimed ? " [claimed]" : ""));
  } else if (const auto* rejected = std::get_if<RejectedFireEvent>(&event)) {
    ++me.terminated;
    key_record(fire_key(rejected->entry->key, rejected->scheduled_at), me, "rejected: queue full");
  }
  changed_.notify_all();
}

// A job that takes `duration` on its replica's clock, ending early on stop
// (removal, shutdown, leadership loss with the cancel policy).
void World::run_for(Clock& clock, nanoseconds duration, std::stop_token stop) {
  (void)sleep_for(clock, duration, std::move(stop));
}

void World::record_run(const std::shared_ptr<Incarnation>& inc, const FireContext& context) {
  std::lock_guard guard(mutex_);
  // A killed process runs nothing. A stopping one runs what its workers
  // started (its stop cancels only what had not), and a paused one whose
  // worker got here (the world moved on while the worker was on its way: a
  // clock waiter it cannot see, such as a ledger writer's retry, stood in
  // for the fire) runs it when it resumes: recorded, not lost.
  if (inc->state == State::dead) return;
  const std::string& key = context.entry->key;
  if (context.manual) {  // a trigger's: judged with the triggers
    outcome_.trigger_runs.push_back(RunRecord{key, context.scheduled_at, context.fire_key, inc->replica, inc->id, context.fence, now_});
    return;
  }
  outcome_.runs.push_back(RunRecord{key, context.scheduled_at, context.fire_key, inc->replica, inc->id, context.fence, now_});
  key_record(context.fire_key, *inc, fmt::format("run fence={}", context.fence));
  Instant& last = replicas_[static_cast<std::size_t>(inc->replica)].last_run[key];
  last = std::max(last, context.scheduled_at);
}

// ---- replicas -------------------------------------------------------------

void World::start_incarnation(int replica, bool with_record) {
  auto inc = std::make_shared<Incarnation>();
  inc->id = next_incarnation_++;
  inc->replica = replica;
  Replica& r = replicas_[static_cast<std::size_t>(replica)];
  inc->clock = std::make_shared<ReplicaClock>(store_wall() + r.offset(now_), r.drift_ppm, *this);
  inc->steady_delta = inc->clock->steady_now().time_since_epoch() - now_;
  SchedulerOptions scheduler;
  scheduler.seconds_field = true;
  scheduler.missed_tolerance = options_.missed_tolerance;
  scheduler.clock = inc->clock;
  scheduler.recorder = std::make_shared<Recorder>(*this, inc);
  scheduler.logger = [](LogLevel, std::string_view) {};
  scheduler.limits.max_concurrent = workers_per_replica;
  scheduler.random_seed = mix(options_.seed ^ static_cast<std::uint64_t>(inc->id));
  if (uses_claims(options_.mode)) scheduler.claimer = std::make_shared<SimClaimer>(*this, inc);
  if (uses_leader(options_.mode)) scheduler.elector = std::make_shared<SimElector>(*this, inc);
  if (options_.ledger) give_fleet_state(scheduler, inc);
  inc->scheduler = std::make_unique<Scheduler>(std::move(scheduler));
  {
    std::lock_guard guard(mutex_);
    by_id_.emplace(inc->id, inc);
    r.current = inc;
    note(fmt::format("r{}/i{} starts{} (clock offset {} ms)", replica, inc->id,
                     with_record ? " with its last-run record" : "",
                     std::chrono::duration_cast<std::chrono::milliseconds>(r.offset(now_)).count()));
  }
  for (const SimJob& job : sim_jobs()) {
    EntryOptions entry;
    entry.key = job.key;
    entry.name = job.key;
    entry.missed_fire = job.missed;
    if (with_record) {
      auto it = r.last_run.find(job.key);
      if (it != r.last_run.end()) entry.last_run = it->second;
    }
    if (uses_claims(options_.mode) && job.jitter > nanoseconds::zero()) entry.jitter = job.jitter;
    std::weak_ptr<Incarnation> weak = inc;
    inc->scheduler->add(job.spec, [this, weak, duration = job.duration](const FireContext& context, std::stop_token stop) {
      auto me = weak.lock();
      if (!me) return;
      record_run(me, context);
      if (duration > nanoseconds::zero()) run_for(*me->clock, duration, stop);
    }, entry);
  }
  inc->scheduler->start();
  if (uses_leader(options_.mode)) {
    const auto splay = nanoseconds{static_cast<std::int64_t>(chance(options_.seed, inc->id, 7) * 5e8)};
    at(now_ + splay, [this, inc] { campaign(inc); });
  }
}

// The ledger, the registry, the controls and the catalogue, not cursors
// (the loss classes the checker knows assume no catch-up).
void World::give_fleet_state(SchedulerOptions& scheduler, const std::shared_ptr<Incarnation>& inc) {
  scheduler.fleet.state = std::make_shared<SimFleetState>(*this, inc, fleet_state_);
  scheduler.fleet.catch_up_reach = nanoseconds::zero();
  std::weak_ptr<Incarnation> weak = inc;
  scheduler.logger = [this, weak](LogLevel, std::string_view line) {
    if (auto me = weak.lock()) note_log(me, line);
  };
  scheduler.fleet.replica_id = sim_replica_id(inc->replica, inc->id);
  {
    std::lock_guard guard(mutex_);
    outcome_.incarnation_of[scheduler.fleet.replica_id] = inc->id;
  }
  scheduler.fleet.replica.host = fmt::format("replica-{}", inc->replica);
  scheduler.fleet.registry_heartbeat_interval = options_.registry_heartbeat;
  scheduler.fleet.ledger_retention = LedgerRetention{LedgerRetention::max_keep_count, LedgerRetention::max_keep_for};
  inc->threads_on_clock = 4;
}

void World::read_ledger() {
  std::vector<std::string> jobs{"no-replica-runs-this"};  // the phantom triggers' expiries
  for (const SimJob& job : sim_jobs()) jobs.push_back(job.key);
  for (const std::string& job : jobs) {
    const LedgerRead read = fleet_state_->read_fires(job, LedgerRetention::max_keep_count);
    if (read.status != LedgerRead::Status::found) throw std::runtime_error("the ledger could not be read: " + read.error);
    for (const FireRecord& record : read.records) outcome_.ledger.emplace(record.fire_key, record);
  }
}

void World::close_spans(Incarnation& inc) {
  for (const auto& [key, from] : inc.span_from) {
    const Instant to = inc.planned.at(key) - nanoseconds{1};
    if (to >= from) outcome_.spans.push_back(Outcome::Span{inc.replica, inc.id, key, from, to});
  }
}

bool World::kill(int replica, bool graceful) {
  std::shared_ptr<Incarnation> inc = replicas_[static_cast<std::size_t>(replica)].current;
  if (!inc || inc->state == State::dead || inc->state == State::stopping) return false;
  {
    std::lock_guard guard(mutex_);
    if (inc->state == State::paused) {
      // A paused process that is killed never wakes: its clock stays put.
      note(fmt::format("r{}/i{} killed while paused", replica, inc->id));
    }
    inc->state = graceful ? State::stopping : State::dead;
    (graceful ? outcome_.stopped : outcome_.killed)[inc->id] = now_;
    note(fmt::format("r{}/i{} {}", replica, inc->id, graceful ? "stopped gracefully (SIGTERM)" : "killed (SIGKILL)"));
  }
  // Stop first (it does not wait: the deadline is now), so the fires still
  // queued are cancelled before any worker comes back from the store: which
  // of them a returning worker would take first is thread timing.
  inc->scheduler->stop(inc->clock->steady_now());
  {
    std::lock_guard guard(mutex_);
    // Unblock its workers: requests not yet processed are lost with the
    // process; answers on the way never arrive.
    auto fail = [&](const std::shared_ptr<Request>& request) {
      for (std::size_t i = 0; i < request->keys.size(); ++i) {
        if (request->results.size() > i && request->results[i].status == ClaimResult::Status::claimed) {
          key_record(request->keys[i], *inc, "granted, answer lost: process stopped");
        }
      }
      request->results.assign(request->keys.size(), ClaimResult::failed("process stopped"));
      answer_locked(*inc, *request);
    };
    std::erase_if(pending_, [&](const std::shared_ptr<Request>& request) {
      if (request->incarnation != inc->id) return false;
      fail(request);
      return true;
    });
    for (const auto& request : inc->in_flight) fail(request);
    inc->in_flight.clear();
    close_spans(*inc);
  }
  // Destroying joins its threads; they may still call us (their calls fail).
  inc->scheduler.reset();
  {
    std::lock_guard guard(mutex_);
    inc->state = State::dead;
    inc->leader = false;
  }
  return true;
}

void World::pause(int replica, nanoseconds length) {
  std::shared_ptr<Incarnation> inc = replicas_[static_cast<std::size_t>(replica)].current;
  if (!inc || inc->state != State::running) return;
  {
    std::lock_guard guard(mutex_);
    inc->state = State::paused;
    inc->paused_at = now_;
    outcome_.pauses[inc->id].emplace_back(now_, nanoseconds::max());
    note(fmt::format("r{}/i{} paused (SIGSTOP) for {} ms", replica, inc->id,
                     std::chrono::duration_cast<std::chrono::milliseconds>(length).count()));
  }
  at(now_ + length, [this, replica, id = inc->id] {
    auto current = replicas_[static_cast<std::size_t>(replica)].current;
    if (current && current->id == id) resume(replica);
  });
}

void World::resume(int replica) {
  std::shared_ptr<Incarnation> inc = replicas_[static_cast<std::size_t>(replica)].current;
  if (!inc || inc->state != State::paused) return;
  const nanoseconds frozen = now_ - inc->paused_at;
  bool campaign_now = false;
  {
    // Running first: its threads wake on the advance below and may call
    // the elector or the claimer at once.
    std::lock_guard guard(mutex_);
    inc->state = State::running;
    if (auto& pauses = outcome_.pauses[inc->id]; !pauses.empty()) pauses.back().second = now_;
    note(fmt::format("r{}/i{} resumed (SIGCONT)", replica, inc->id));
    campaign_now = std::exchange(inc->campaign_due_on_resume, false);
  }
  // Its clocks jump by the pause; then it reads the answers that arrived
  // while it was stopped (so a stale check on them sees the new time).
  inc->clock->inner().advance(frozen);
  {
    std::lock_guard guard(mutex_);
    auto arrived = inc->in_flight;
    for (const auto& request : arrived) {
      if (request->deliver_at <= now_) deliver_locked(request);
    }
  }
  if (campaign_now) at(now_, [this, inc] { campaign(inc); });
  demote_if_expired(inc);
  changed_.notify_all();
}

void World::schedule_faults(int replica) {
  const FaultPlan& f = options_.faults;
  auto ttl = std::chrono::duration_cast<nanoseconds>(options_.claim_ttl);
  for (nanoseconds t = now_; f.crash_every.count() > 0;) {
    t += exponential(f.crash_every);
    if (t >= end_) break;
    const auto down = nanoseconds{1s} + nanoseconds{static_cast<std::int64_t>(
                                            std::uniform_real_distribution<double>(0, 2.0)(random_) * static_cast<double>(ttl.count()))};
    const bool with_record = std::uniform_real_distribution<double>(0, 1)(random_) < f.restart_with_record;
    at(t, [this, replica, down, with_record] {
      if (!kill(replica, false)) return;  // already down: its own restart is planned
      at(now_ + down, [this, replica, with_record] {
        auto& current = replicas_[static_cast<std::size_t>(replica)].current;
        if (current && current->state == State::dead) start_incarnation(replica, with_record);
      });
    });
    t += down;
  }
  for (nanoseconds t = now_; f.graceful_restart_every.count() > 0;) {
    t += exponential(f.graceful_restart_every);
    if (t >= end_) break;
    at(t, [this, replica] {
      if (!kill(replica, true)) return;  // down already (crashed): not cut short
      at(now_ + 2s, [this, replica] {
        auto& current = replicas_[static_cast<std::size_t>(replica)].current;
        if (current && current->state == State::dead) start_incarnation(replica, true);
      });
    });
  }
  for (nanoseconds t = now_; f.pause_every.count() > 0;) {
    t += exponential(f.pause_every);
    if (t >= end_) break;
    const auto length = nanoseconds{1s} + nanoseconds{static_cast<std::int64_t>(
                                              std::uniform_real_distribution<double>(0, 1.5)(random_) * static_cast<double>(ttl.count()))};
    at(t, [this, replica, length] { pause(replica, length); });
  }
}

// A failover to a replica that lacks the last writes (or a restart from a
// snapshot): the claims granted in the last `lost` are gone, the fence
// counter goes back with them, the epoch record stays, the server identity
// changes. (The lease and terms are left alone: leader mode's exception in
// the checker is for wipes.)
void World::roll_back_store(nanoseconds lost) {
  std::lock_guard guard(mutex_);
  std::uint64_t kept_fence = 0;
  std::size_t dropped = 0;
  for (auto it = claims_.begin(); it != claims_.end();) {
    if (it->second.granted > now_ - lost) {
      it = claims_.erase(it);
      ++dropped;
    } else {
      kept_fence = std::max(kept_fence, it->second.fence);
      ++it;
    }
  }
  fence_counter_ = std::min(fence_counter_, kept_fence);
  ++store_identity_;
  outcome_.wipes.push_back(now_);
  if (fleet_state_) lose_documents_locked(lost);
  note(fmt::format("store failed over to a replica {} ms behind: {} claims lost",
                   std::chrono::duration_cast<std::chrono::milliseconds>(lost).count(), dropped));
}

void World::schedule_store_faults() {
  const FaultPlan& f = options_.faults;
  for (nanoseconds t = now_; f.store_restart_every.count() > 0;) {
    t += exponential(f.store_restart_every);
    if (t >= end_) break;
    at(t, [this] {
      std::lock_guard guard(mutex_);
      claims_.clear();
      claim_expiry_.clear();
      lease_holder_ = 0;
      fence_counter_ = 0;  // the counters are lost too: fences fall back to the time floor
      term_counter_ = 0;
      store_epoch_.reset();
      ++store_identity_;
      outcome_.wipes.push_back(now_);
      note("store restarted: every key lost");
      if (fleet_state_) lose_documents_locked(nanoseconds::max());
    });
  }
  for (nanoseconds t = now_; f.store_rollback_every.count() > 0;) {
    t += exponential(f.store_rollback_every);
    if (t >= end_) break;
    const auto lost = std::chrono::duration_cast<nanoseconds>(
        std::chrono::duration<double>(std::uniform_real_distribution<double>(0.1, 3)(random_)));
    at(t, [this, lost] { roll_back_store(lost); });
  }
  for (nanoseconds t = now_; f.store_outage_every.count() > 0;) {
    t += exponential(f.store_outage_every);
    if (t >= end_) break;
    const auto length = nanoseconds{1s} + std::chrono::duration_cast<nanoseconds>(
                                             std::chrono::duration<double>(std::uniform_real_distribution<double>(0, 29)(random_)));
    at(t, [this, length] {
      std::lock_guard guard(mutex_);
      outage_until_ = now_ + length;
      outcome_.outages.emplace_back(now_, outage_until_);
      note(fmt::format("store unreachable for {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(length).count()));
    });
    t += length;
  }
}

void World::lose_documents_locked(nanoseconds lost) {
  outcome_.document_losses.push_back(Outcome::DocumentLoss{now_, lost});
  if (lost == nanoseconds::max()) {
    for (StoredDocument& document : documents_) document = StoredDocument{std::nullopt, ++document_revisions_};
    document_writes_.clear();
    std::vector<int> running;
    for (const auto& [id, inc] : by_id_) {
      if (inc->state == State::running) running.push_back(id);
    }
    at(now_ + 2 * options_.registry_heartbeat + 2s, [this, wiped = now_, running] { probe_catalogue(wiped, running); });
    return;
  }
  while (!document_writes_.empty() && document_writes_.back().at > now_ - lost) {
    const DocumentWrite& write = document_writes_.back();
    documents_.at(write.which) = StoredDocument{write.before.text, ++document_revisions_};
    document_writes_.pop_back();
  }
}

// Two heartbeats after a wipe, the catalogue lists every job again: each
// replica that announces finds its record gone and rewrites it at once.
void World::probe_catalogue(nanoseconds wiped, std::vector<int> running_at_wipe) {
  std::lock_guard guard(mutex_);
  Outcome::CatalogueProbe probe{wiped, now_, 0, {}};
  for (const SimJob& job : sim_jobs()) {
    const auto& text = documents_.at(FleetState::slot({FleetState::Document::catalogue, catalogue_part(job.key)})).text;
    const auto jobs = text ? parse_job_catalogue(*text) : std::nullopt;
    probe.listed += static_cast<std::size_t>(
        jobs && std::any_of(jobs->begin(), jobs->end(), [&](const CataloguedJob& j) { return j.job_key == job.key; }));
  }
  for (const auto& [from, to] : outcome_.outages) {
    if (from < now_ && to > wiped) probe.excuse = "a store outage in between";
  }
  for (const Outcome::DocumentLoss& loss : outcome_.document_losses) {
    if (loss.at > wiped && loss.at <= now_) probe.excuse = "the store went back again in between";
  }
  const bool one_ran_throughout = std::any_of(running_at_wipe.begin(), running_at_wipe.end(), [&](int id) {
    const Incarnation* inc = find(id);
    const auto pauses = outcome_.pauses.find(id);
    return inc != nullptr && inc->state == State::running &&
           (pauses == outcome_.pauses.end() ||
            std::none_of(pauses->second.begin(), pauses->second.end(), [&](const auto& p) { return p.first < now_ && p.second > wiped; }));
  });
  if (!one_ran_throughout) probe.excuse = "no replica ran throughout";
  outcome_.catalogue_probes.push_back(std::move(probe));
}

// The operator asks for a trigger now and then (every fifth for a job no
// replica runs, which must expire and be recorded), sending the request
// again with its request id until the store answers.
void World::schedule_triggers() {
  const FaultPlan& f = options_.faults;
  if (!fleet_state_ || f.trigger_every.count() <= 0) return;
  for (nanoseconds t = now_ + exponential(f.trigger_every); t < end_; t += exponential(f.trigger_every)) {
    const std::size_t index = outcome_.triggers.size();
    Outcome::TriggerAsked asked;
    asked.phantom = index % 5 == 4;
    asked.job_key = asked.phantom ? std::string("no-replica-runs-this")
                                  : sim_jobs()[mix(options_.seed ^ index) % sim_jobs().size()].key;
    asked.id = trigger_id_of(asked.job_key, fmt::format("sim-{}", index));
    asked.wait = asked.phantom ? nanoseconds{1min} : default_trigger_wait;
    asked.first_sent = t;
    outcome_.triggers.push_back(std::move(asked));
    at(t, [this, index] { send_trigger(index, 0); });
  }
}

void World::send_trigger(std::size_t index, int attempt) {
  Outcome::TriggerAsked& asked = outcome_.triggers.at(index);  // the world's thread alone touches it
  const Instant stamp{std::chrono::floor<std::chrono::microseconds>(store_wall())};  // as the store keeps it
  asked.stamps.push_back(stamp);
  const ControlChange change =
      operator_state_->request_trigger(asked.job_key, "operator", stamp, asked.wait, fmt::format("sim-{}", index));
  if (change.status == ControlChange::Status::changed || change.status == ControlChange::Status::unchanged) {
    asked.answer = change.status == ControlChange::Status::changed ? "changed" : "unchanged";
    if (change.trigger_id != asked.id) {
      throw std::runtime_error(fmt::format("trigger {}: answered with id {}", asked.id, change.trigger_id));
    }
    return;
  }
  if (attempt >= 30) {
    asked.answer = "unanswered";
    return;
  }
  at(now_ + 2s, [this, index, attempt] { send_trigger(index, attempt + 1); });
}

// ---- quiescence and the store ---------------------------------------------

bool World::quiescent_locked() const {
  for (const auto& [id, inc] : by_id_) {
    if (inc->state != State::running) continue;
    // Its loop and its timeout watchdog wait on its clock when idle (the
    // workers wait for fires): until both do, a deadline may still change.
    const std::uint64_t threads_on_clock = inc->threads_on_clock;
    if (inc->clock->inner().due_waiter_count() != 0 || inc->clock->inner().waiter_count() < threads_on_clock) return false;
    // Parked loops have published every fire they took: each is decided or
    // waits for the store. (An entry may be due on a drifting wall clock
    // before the loop's steady deadline: that is lateness, not work left.)
    // Every fire waiting for the store holds a worker (its own, or one its
    // claim batch reserved): when they hold them all, fires queued behind
    // them wait for the store too. (Which fires made it into this round's
    // batches then depends on thread timing: the one case where a replay
    // may differ.)
    // Fires asleep on the clock (in their jitter, or running a job that
    // takes time) are waiting for time like the loop: every clock waiter
    // beyond the loop and the watchdog is one of them.
    const std::uint64_t waiters = inc->clock->inner().waiter_count();
    const std::uint64_t sleepers = waiters > threads_on_clock ? waiters - threads_on_clock : 0;
    const std::uint64_t undecided = inc->emitted - std::min(inc->emitted, inc->terminated + inc->parked);
    if (undecided > sleepers && inc->parked + sleepers < workers_per_replica) return false;
  }
  return true;
}

bool World::saturated_locked() const {
  for (const auto& [id, inc] : by_id_) {
    if (inc->state != State::running) continue;
    const std::uint64_t waiters = inc->clock->inner().waiter_count();
    const std::uint64_t sleepers = waiters > inc->threads_on_clock ? waiters - inc->threads_on_clock : 0;
    const std::uint64_t undecided = inc->emitted - std::min(inc->emitted, inc->terminated + inc->parked);
    if (undecided > sleepers) return true;
  }
  return false;
}

void World::wait_quiescent() {
  std::unique_lock lock(mutex_);
  const auto limit = std::chrono::steady_clock::now() + 30s;
  // Threads announce waking (poke) but not falling asleep inside the
  // VirtualClock, so the wait polls as well, briefly at first.
  auto poll = 20us;
  while (!quiescent_locked()) {
    changed_.wait_for(lock, poll);
    poll = std::min<std::chrono::microseconds>(poll * 2, 1ms);
    if (std::chrono::steady_clock::now() > limit) {
      std::string state;
      for (const auto& [id, inc] : by_id_) {
        if (inc->state != State::running) continue;
        std::string overdue;
        for (const auto& [key, next] : inc->planned) {
          if (next <= inc->clock->now()) overdue += " " + fire_key(key, next);
        }
        state += fmt::format(" [r{}/i{} waiters {} due {} emitted {} terminated {} parked {} overdue:{}]", inc->replica, id,
                             inc->clock->inner().waiter_count(), inc->clock->inner().due_waiter_count(), inc->emitted,
                             inc->terminated, inc->parked, overdue.empty() ? " none" : overdue);
      }
      throw std::runtime_error(fmt::format("seed {}: the fleet did not settle at t={} ns:{}", options_.seed, now_.count(), state));
    }
  }
}

void World::deliver_locked(const std::shared_ptr<Request>& request) {
  Incarnation* inc = find(request->incarnation);
  if (inc == nullptr || request->done) return;
  for (std::size_t i = 0; i < request->keys.size(); ++i) {
    if (request->results[i].status == ClaimResult::Status::claimed) key_record(request->keys[i], *inc, "claimed (answer delivered)");
  }
  std::erase(inc->in_flight, request);
  answer_locked(*inc, *request);
}

void World::answer_locked(Incarnation& inc, Request& request) {
  // Whoever answers updates the counts, not the woken worker: quiescence
  // must never see the answer given but the worker still counted as waiting.
  request.done = true;
  inc.parked -= request.keys.size();
  request.cv.notify_all();
}

void World::process_round() {
  std::lock_guard guard(mutex_);
  ++round_;
  ++outcome_.rounds;
  std::vector<std::shared_ptr<Request>> requests;
  requests.swap(pending_);
  outcome_.requests += requests.size();
  const FaultPlan& f = options_.faults;
  const bool outage = now_ < outage_until_;
  const auto claim_ttl = options_.broken_store ? nanoseconds{1s} : nanoseconds{options_.claim_ttl};
  while (!claim_expiry_.empty() && claim_expiry_.front().first <= now_) {
    auto it = claims_.find(claim_expiry_.front().second);
    if (it != claims_.end() && it->second.expires <= now_) claims_.erase(it);
    claim_expiry_.pop_front();
  }
  // Each replica's fate this round: a pure function of (seed, incarnation, round).
  enum class Fate { ok, slow, very_slow, timeout_applied, timeout_lost };
  auto fate_of = [&](int inc) {
    const double x = chance(options_.seed, inc, round_, 1);
    if (x < f.round_timeout / 2) return Fate::timeout_lost;
    if (x < f.round_timeout) return Fate::timeout_applied;
    if (x < f.round_timeout + f.round_very_slow) return Fate::very_slow;
    if (x < f.round_timeout + f.round_very_slow + f.round_slow) return Fate::slow;
    return Fate::ok;
  };
  struct Item {
    std::string_view key;
    std::uint64_t order;
    Request* request;
    std::size_t index;
  };
  std::vector<Item> items;
  for (const auto& request : requests) {
    request->results.assign(request->keys.size(), ClaimResult::failed("unanswered"));
    for (std::size_t i = 0; i < request->keys.size(); ++i) {
      const std::string& key = request->keys[i];
      items.push_back(Item{key, mix(options_.seed ^ hash_text(key) ^ mix(round_ + static_cast<std::uint64_t>(request->incarnation))),
                           request.get(), i});
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.key != b.key ? a.key < b.key : a.order < b.order;
  });
  for (const Item& item : items) {
    Request& request = *item.request;
    Incarnation& inc = *find(request.incarnation);
    const std::string key(item.key);
    ClaimResult& result = request.results[item.index];
    const Fate fate = fate_of(inc.id);
    if (outage) {
      result = ClaimResult::failed("store unreachable");
      continue;
    }
    if (fate == Fate::timeout_lost) {
      result = ClaimResult::failed("command timed out before the store saw it");
      continue;
    }
    if (chance(options_.seed, hash_text(key), inc.id, 2) < f.request_error) {
      result = ClaimResult::failed("ERR injected store error");
      continue;
    }
    const auto offset = request.sent_wall - store_wall();
    if (std::chrono::abs(offset) > options_.max_clock_skew) {
      result = ClaimResult::skewed(fmt::format("clock offset {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(offset).count()));
      continue;
    }
    // The Redis claim script's reset rule (src/redis/scripts.h): no epoch
    // record, another server identity, or a fence counter below one this
    // replica saw means the store lost writes; the finder writes a new
    // epoch, and fires before epoch + skew are refused.
    if (options_.without_reset_rule) {
      store_epoch_ = sim_epoch() - std::chrono::hours{1};
    } else if (!store_epoch_ || store_identity_ != epoch_identity_ || fence_counter_ < inc.fence_seen) {
      store_epoch_ = store_wall();
      epoch_identity_ = store_identity_;
      fence_counter_ = std::max(fence_counter_, inc.fence_seen);
      note(fmt::format("r{}/i{} found the store reset: epoch {}", inc.replica, inc.id, format_rfc3339(*store_epoch_)));
    }
    inc.fence_seen = std::max(inc.fence_seen, fence_counter_);
    if (const auto at = fire_key_instant(key); at && *at < *store_epoch_ + options_.max_clock_skew) {
      result = ClaimResult::reset(fmt::format("scheduled before the store's reset epoch {}", format_rfc3339(*store_epoch_)));
      continue;
    }
    auto it = claims_.find(key);
    if (it != claims_.end() && it->second.expires > now_) {
      result = ClaimResult::taken();
      continue;
    }
    fence_counter_ = std::max<std::uint64_t>(fence_counter_ + 1, static_cast<std::uint64_t>(to_us(store_wall())));
    claims_[key] = StoredClaim{now_ + claim_ttl, fence_counter_, now_};
    if (fate != Fate::timeout_applied) inc.fence_seen = fence_counter_;
    claim_expiry_.emplace_back(now_ + claim_ttl, key);
    key_record(key, inc, fmt::format("granted fence={}", fence_counter_));
    if (fate == Fate::timeout_applied) {
      key_record(key, inc, "granted, answer lost: command timed out");
      result = ClaimResult::failed("command timed out after the store applied it");
    } else {
      result = ClaimResult::claimed(fence_counter_);
    }
  }
  // The delay is one per incarnation and round: noted once, however the
  // scheduler split that incarnation's fires into requests (batch sizes
  // follow the workers free at the moment, which is thread timing).
  std::set<int> delay_noted;
  for (const auto& request : requests) {
    Incarnation& inc = *find(request->incarnation);
    nanoseconds delay{0};
    switch (fate_of(inc.id)) {
      case Fate::ok: break;
      case Fate::slow: delay = nanoseconds{static_cast<std::int64_t>(chance(options_.seed, inc.id, round_, 3) * 2e9)}; break;
      case Fate::very_slow:
        delay = nanoseconds{static_cast<std::int64_t>(chance(options_.seed, inc.id, round_, 4) * 2.0 *
                                                      static_cast<double>(nanoseconds{options_.claim_ttl}.count()))};
        break;
      case Fate::timeout_applied:
      case Fate::timeout_lost: delay = options_.command_timeout; break;
    }
    if (outage) delay = options_.command_timeout;
    if (delay == nanoseconds::zero() && inc.state == State::running) {
      deliver_locked(request);
      continue;
    }
    request->deliver_at = now_ + delay;
    inc.in_flight.push_back(request);
    if (delay > nanoseconds::zero() && delay_noted.insert(inc.id).second) note(fmt::format("r{}/i{} answer delayed {} ms", inc.replica, inc.id,
                                                      std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()));
    at(now_ + delay, [this, request] {
      std::lock_guard hold(mutex_);
      Incarnation* target = find(request->incarnation);
      if (target == nullptr || request->done) return;
      if (target->state == State::paused) return;  // stays in flight: resume() delivers it
      deliver_locked(request);
    });
  }
}

// ---- the elector model ----------------------------------------------------

void World::demote_locked(Incarnation& inc, std::vector<std::function<void()>>& calls) {
  if (!inc.leader) return;
  inc.leader = false;
  inc.fresh_term = true;
  note(fmt::format("r{}/i{} no longer leads term {}", inc.replica, inc.id, inc.term));
  if (inc.lost) calls.push_back([lost = inc.lost, term = inc.term] { lost(term); });
}

void World::demote_if_expired(const std::shared_ptr<Incarnation>& inc) {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard guard(mutex_);
    if (inc->state == State::running && inc->leader && inc->clock->steady_now() >= inc->local_deadline) {
      demote_locked(*inc, calls);
    }
  }
  for (auto& call : calls) call();
}

void World::campaign(const std::shared_ptr<Incarnation>& inc) {
  std::vector<std::function<void()>> calls;
  std::function<bool()> fit;
  {
    std::lock_guard guard(mutex_);
    fit = inc->fit;
  }
  const bool unfit = fit && inc->state == State::running && !fit();  // outside the world's lock: it locks the scheduler's
  {
    std::lock_guard guard(mutex_);
    if (inc->state == State::dead || inc->state == State::stopping) return;
    if (inc->state == State::paused) {
      inc->campaign_due_on_resume = true;
      return;
    }
    if (unfit) {
      if (lease_holder_ == inc->id && now_ < lease_expires_) {
        lease_holder_ = 0;
        note(fmt::format("r{}/i{} unfit to lead: frees the lease", inc->replica, inc->id));
      }
      demote_locked(*inc, calls);
      at(now_ + nanoseconds{options_.follower_poll}, [this, inc] { campaign(inc); });
    }
  }
  if (unfit) {
    for (auto& call : calls) call();
    return;
  }
  {
    std::lock_guard guard(mutex_);
    if (inc->state == State::dead || inc->state == State::stopping) return;
    const std::uint64_t n = ++inc->campaigns;
    const auto sent = inc->clock->steady_now();
    const double x = chance(options_.seed, inc->id, n, 5);
    const bool outage = now_ < outage_until_;
    nanoseconds delay{0};
    bool applied = true;
    bool answered = true;
    if (outage || x < options_.faults.round_timeout / 2) {
      applied = false;
      answered = false;
      delay = options_.command_timeout;
    } else if (x < options_.faults.round_timeout) {
      answered = false;
      delay = options_.command_timeout;
    } else if (x < options_.faults.round_timeout + options_.faults.round_slow) {
      delay = nanoseconds{static_cast<std::int64_t>(chance(options_.seed, inc->id, n, 6) * 2e9)};
    }
    bool won = false;
    std::uint64_t term = 0;
    if (applied) {
      if (lease_holder_ == inc->id && now_ < lease_expires_ && !inc->fresh_term) {
        won = true;
      } else if (lease_holder_ == 0 || now_ >= lease_expires_ || lease_holder_ == inc->id) {
        lease_holder_ = inc->id;
        term_counter_ = std::max<std::uint64_t>(term_counter_ + 1, static_cast<std::uint64_t>(to_us(store_wall())));
        lease_term_ = term_counter_;
        won = true;
        note(fmt::format("store: r{}/i{} takes the lease, term {}", inc->replica, inc->id, lease_term_));
      }
      if (won) {
        lease_expires_ = now_ + nanoseconds{options_.lease_ttl};
        term = lease_term_;
      }
    }
    // The answer arrives after `delay`; then the next campaign is planned.
    at(now_ + delay, [this, inc, sent, won, term, answered] {
      std::vector<std::function<void()>> later;
      {
        std::lock_guard hold(mutex_);
        if (inc->state == State::dead || inc->state == State::stopping) return;
        if (inc->state == State::paused) {
          inc->campaign_due_on_resume = true;  // the answer is stale by then: ask again
          return;
        }
        if (answered) {
          if (won) {
            const auto deadline = sent + nanoseconds{options_.lease_ttl} - nanoseconds{options_.renew_margin};
            if (inc->clock->steady_now() < deadline) {
              if (!inc->leader || inc->term != term) {
                if (inc->leader) demote_locked(*inc, later);
                note(fmt::format("r{}/i{} leads term {}", inc->replica, inc->id, term));
              }
              inc->leader = true;
              inc->term = term;
              inc->fresh_term = false;
              inc->local_deadline = deadline;
              at(deadline.time_since_epoch() - inc->steady_delta, [this, inc] { demote_if_expired(inc); });
            }
          } else {
            demote_locked(*inc, later);
          }
        }
        const auto next = inc->leader ? nanoseconds{options_.lease_ttl} / 3 : nanoseconds{options_.follower_poll};
        at(now_ + next, [this, inc] { campaign(inc); });
      }
      for (auto& call : later) call();
    });
  }
  for (auto& call : calls) call();
}

// ---- the run --------------------------------------------------------------

Outcome World::run() {
  const FaultPlan& f = options_.faults;
  replicas_.resize(static_cast<std::size_t>(options_.replicas));
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    Replica& r = replicas_[i];
    const double spread = std::uniform_real_distribution<double>(-1, 1)(random_);
    r.initial_offset = std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(spread * static_cast<double>(f.max_clock_offset.count())));
    r.drift_ppm = std::uniform_real_distribution<double>(-1, 1)(random_) * f.max_drift_ppm;
  }
  if (replicas_.size() >= 3 && std::uniform_real_distribution<double>(0, 1)(random_) < f.guard_edges) {
    // Two replicas at opposite ends of the skew guard: the case the dedup
    // window (claim_ttl - 2 * skew) is computed for.
    replicas_[1].initial_offset = options_.max_clock_skew - 1s;
    replicas_[2].initial_offset = -(options_.max_clock_skew - 1s);
    replicas_[1].drift_ppm = replicas_[2].drift_ppm = 0;
    note(fmt::format("r1 and r2 {} s apart, at opposite ends of the skew guard", 2 * (options_.max_clock_skew - 1s) / 1s));
  }
  if (std::uniform_real_distribution<double>(0, 1)(random_) < f.skewed_replica) {
    replicas_[0].initial_offset = options_.max_clock_skew + std::chrono::seconds{5};
    note(fmt::format("r0's clock is {} s ahead: beyond the skew guard", replicas_[0].initial_offset / 1s));
  }
  for (int i = 0; i < options_.replicas; ++i) {
    start_incarnation(i, false);
    schedule_faults(i);
  }
  schedule_store_faults();
  schedule_triggers();

  while (true) {
    wait_quiescent();
    {
      std::unique_lock lock(mutex_);
      if (!pending_.empty()) {
        if (saturated_locked()) ++outcome_.saturated_rounds;
        lock.unlock();
        process_round();
        continue;
      }
    }
    nanoseconds next = events_.empty() ? nanoseconds::max() : events_.top().at;
    for (const auto& [id, inc] : by_id_) {
      if (inc->state != State::running) continue;
      if (auto deadline = inc->clock->inner().next_deadline()) {
        next = std::min(next, deadline->time_since_epoch() - inc->steady_delta);
      }
    }
    if (next >= end_) break;
    next = std::max(next, now_);
    const nanoseconds step = next - now_;
    {
      // The replicas' threads read it under the lock (their events, the
      // store's calls): one still finishing a decision past quiescence
      // (the saturated case) reads the old time or the new, never a torn one.
      std::lock_guard guard(mutex_);
      now_ = next;
    }
    ++outcome_.steps;
    for (const auto& [id, inc] : by_id_) {
      if (inc->state == State::running && step > nanoseconds::zero()) inc->clock->inner().advance(step);
    }
    if (store_clock_ && step > nanoseconds::zero()) store_clock_->advance(step);
    while (!events_.empty() && events_.top().at <= now_) {
      auto action = events_.top().action;
      events_.pop();
      action();
    }
  }
  // The end: every replica stops; spans close where their loops stood.
  // With a fleet state, gracefully: how far a ledger writer lags behind
  // simulated time depends on the host's speed (time does not wait for
  // it), and its stop writes what it still holds, so the ledger judged is
  // the same on a slow host (under a sanitizer, beside other work).
  for (int i = 0; i < options_.replicas; ++i) {
    auto& current = replicas_[static_cast<std::size_t>(i)].current;
    if (current && current->state == State::paused) {
      std::lock_guard guard(mutex_);
      current->state = State::running;  // so kill() closes it like the others
    }
    kill(i, fleet_state_ != nullptr);
  }
  outcome_.faults.emplace_back(now_, "end of simulation");
  if (fleet_state_) read_ledger();
  return std::move(outcome_);
}

}  // namespace

Outcome simulate(const SimOptions& options) {
  World world(options);
  return world.run();
}

}  // namespace fleetcron::sim
