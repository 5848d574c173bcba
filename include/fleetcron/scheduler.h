// fleetcron — the in-process scheduler.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/cron.h"
#include "fleetcron/error.h"
#include "fleetcron/events.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/schedule.h"

namespace fleetcron {

/// What a job learns about the run it is part of.
struct FLEETCRON_API FireContext {
  EntryRef entry;
  /// entry key + "@" + scheduled instant (see fire_key()); for manual runs
  /// the instant is the trigger time.
  std::string fire_key;
  /// The instant from the schedule (never the jittered or actual start).
  Instant scheduled_at;
  /// 1 for the first attempt, 2 for the first retry, …
  int attempt = 1;
  /// The fencing token: the claim's token when a claimer decided the fire,
  /// else the leadership term when an elector did, else 0. Make side
  /// effects conditional on it (docs/fencing.md).
  std::uint64_t fence = 0;
  /// True for trigger()/trigger_and_wait()/trigger_by_name() runs.
  bool manual = false;
  /// A re-run of a fire whose run was lost (EntryOptions::recover): the
  /// lost run's fence, and how many times the fire was re-run (1 for the
  /// first); 0 for every other run. Deduplicate on them.
  std::uint64_t recovered_fence = 0;
  int recovery = 0;
  /// Where the job may tell how its run went (exit status, output): the
  /// JobCompletedEvent and the ledger record carry what the last attempt
  /// left here. Never null while the scheduler calls the job.
  RunDetails* details = nullptr;
};

/// A job: throw to report failure. Honour `stop`: it is requested on
/// stop(), timeout, removal of the entry, and (leader-gated runs, policy
/// cancel) leadership loss. C++ cannot abort a thread; a job that ignores
/// the token runs to its end.
using Job = std::function<void(const FireContext& context, std::stop_token stop)>;

/// Retries after a failed attempt: delay_n = min(initial_delay ·
/// multiplier^(n-1), max_delay) ± jitter_fraction · delay_n.
struct FLEETCRON_API RetryPolicy {
  int max_retries = 0;                                   ///< 0 = no retry; at most 1,000
  std::chrono::nanoseconds initial_delay = std::chrono::seconds{1};  ///< > 0
  double multiplier = 2.0;                               ///< >= 1
  std::chrono::nanoseconds max_delay = std::chrono::minutes{1};      ///< >= initial_delay
  double jitter_fraction = 0.0;                          ///< in [0, 1]
};

/// What an automatic fire does while the previous run of its entry is
/// still going. Decided on this replica before the claim, so a replica
/// that will not run a fire never takes it from the others; and, for a
/// keyed, coordinated entry with the replica registry on, after the claim
/// across the fleet (docs/fleet-state.md#fleet-wide-overlap): skip reports
/// the run elsewhere, queue waits for it.
enum class OverlapPolicy {
  allow,  ///< runs concurrently (default)
  skip,   ///< skipped (SkippedFireEvent, SkipReason::overlap), not claimed
  queue,  ///< waits, unclaimed, for the running one (holding a worker); at most one waits, others skip
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(OverlapPolicy policy) noexcept;

/// What running leader-gated jobs do when leadership is lost.
enum class LeadershipLossPolicy {
  cancel,      ///< request their stop tokens (default)
  let_finish,  ///< leave them alone
};

enum class LogLevel { debug, info, warning, error };
using Logger = std::function<void(LogLevel level, std::string_view message)>;

/// The scheduler's bounds. Each is refused outside its range, with the
/// option's name and value, by Scheduler's constructor.
struct FLEETCRON_API SchedulerLimits {
  /// Worker threads: the most jobs running at once. 1 to 4,096; default 16.
  std::size_t max_concurrent = 16;
  /// Fires waiting for a worker, with those a worker took out of the
  /// queue to decide together (a claim batch, the fires it looks at); a
  /// fire finding the queue full is rejected (RejectedFireEvent), never
  /// silently lost. 1 to 10,000,000; default 100,000.
  std::size_t max_queued = 100'000;
  /// Entries. 1 to 100,000,000; default 10,000,000.
  std::size_t max_entries = 10'000'000;
  /// Events waiting for the observers; beyond, they are dropped and counted
  /// (ObserverDropEvent). 1 to 1,000,000; default 1,024.
  std::size_t observer_queue = 1024;
  /// Ledger records waiting to be written; beyond, a record is dropped,
  /// counted and logged. 1 to 1,000,000; default 10,000.
  std::size_t ledger_queue = 10'000;
};

/// What the scheduler keeps in the fleet state (docs/fleet-state.md).
/// Nothing without `state`; with one, every part is on by default.
struct FLEETCRON_API FleetOptions {
  /// Where the fleet keeps each entry's cursor: the newest instant it
  /// handled. With one set, every keyed entry's cursor advances before
  /// each of its fires runs, and the instants missed while the whole fleet
  /// was down (between the cursor and the entry's first fire here) go
  /// through the entry's missed-fire policy once across the fleet, when
  /// the entry is added or the scheduler starts. None by default.
  std::shared_ptr<FleetState> state;
  /// How far back that catch-up reaches: instants older than this are not
  /// run. 0 (catch-up and the cursor off) to 366 days; default 7 days.
  std::chrono::nanoseconds catch_up_reach = std::chrono::hours{24 * 7};
  /// Whether catch-up reaches instants older than the claimer's dedup
  /// window. Those are run on the cursor's word alone: a replica that
  /// claims without moving the cursor (libtnb/cron's Go replicas) may have
  /// run them while every replica of this kind was down. False keeps
  /// catch-up within the window, where claims keep every instant once
  /// whoever runs it; with an elector and no claimer it turns catch-up off.
  bool catch_up_beyond_dedup_window = true;
  /// Whether each keyed entry's fires are recorded in the run ledger:
  /// runs, the skips an operator must see, claimed fires cancelled, missed
  /// instants. Written off the scheduling path, in batches, from a queue
  /// of SchedulerLimits::ledger_queue records.
  bool ledger = true;
  /// How long the ledger's writer lets records gather before it writes
  /// them: a record waits at most this long (on the machine's steady
  /// clock, not `clock`: it delays a write and decides nothing) for the
  /// records of runs that end just after its own, so that they share one
  /// request to the store. 0 (each write as soon as the writer is free)
  /// to 1 s; default 20 ms.
  std::chrono::nanoseconds ledger_gather_window = std::chrono::milliseconds{20};
  /// Each entry's ledger bounds unless the entry sets its own (default:
  /// the newest 100 records, none older than 30 days).
  LedgerRetention ledger_retention;
  /// Whether the fleet's controls (docs/fleet-state.md#controls) act on
  /// the keyed entries: a job paused fleet-wide is paused here (and resumed
  /// when the fleet resumes it), and a trigger for it is taken and run by
  /// one replica. Read at start() and then every `control_poll_interval`
  /// (10 ms to 1 minute; default 1 s), which bounds how late a replica
  /// sees a change.
  bool controls = true;
  std::chrono::nanoseconds control_poll_interval = std::chrono::seconds{1};
  /// Names this replica in the fleet state: 1 to 64 characters, no
  /// whitespace; default "replica-" and 16 random hex digits.
  std::string replica_id;
  /// Whether this replica keeps a record in the replica registry
  /// (docs/fleet-state.md#replica-registry), every
  /// `registry_heartbeat_interval` (10 ms to 1 minute; default 5 s; a
  /// record lives 3 of them), and refuses coordinated fires (skipped as
  /// fleet-settings, caught up later by none of its own) while its
  /// `replica.settings` differ from the fleet's or are not verified yet:
  /// until its first announcement succeeds, and once its record has gone
  /// 3 intervals without one.
  bool registry = true;
  std::chrono::nanoseconds registry_heartbeat_interval = std::chrono::seconds{5};
  /// What the record says: host, pid, version, and the settings the
  /// deduplication depends on (the daemon: claim TTL, skew guard, mode,
  /// prefixes, buckets, lease). The scheduler sets its replica_id,
  /// started (at start()) and jobs_digest (of the keyed entries' keys and
  /// schedules), whatever is given.
  ReplicaAnnouncement replica;
};

/// Scheduler-wide settings, grouped: the schedule's defaults, the bounds
/// (`limits`), the observers and logs, the coordination, the fleet state
/// (`fleet`), time. Scheduler's constructor validates them and throws
/// std::invalid_argument naming the option and the value.
struct FLEETCRON_API SchedulerOptions {
  /// Zone of specs without TZ=; seconds field (5 or 6 fields when true).
  TimeZone zone = TimeZone::utc();
  bool seconds_field = false;
  /// Missed fires: later than `missed_tolerance` (> 0, default 60 s).
  MissedFirePolicy missed_fire = MissedFirePolicy::run_once;
  std::chrono::nanoseconds missed_tolerance = std::chrono::seconds{60};
  /// Uniform delay in [0, jitter) before each automatic fire (>= 0).
  std::chrono::nanoseconds jitter{0};
  /// Retry for every entry unless the entry sets its own.
  std::optional<RetryPolicy> retry;
  SchedulerLimits limits;
  std::vector<std::shared_ptr<Observer>> observers;
  std::shared_ptr<Observer> recorder;
  /// Log sink; default: warnings and errors to stderr.
  Logger logger;
  /// Whether the logger also gets a line for each abnormal fire that is
  /// published as an event (a skip with an error, missed fires, a rejected
  /// fire, a failed run, a step-down). Turn it off when an observer logs
  /// the events, so each is logged once.
  bool log_events = true;
  /// Coordination for automatic fires (none by default: one process).
  std::shared_ptr<Claimer> claimer;
  std::shared_ptr<Elector> elector;
  LeadershipLossPolicy on_leadership_lost = LeadershipLossPolicy::cancel;
  FleetOptions fleet;
  /// Time source; default system_clock().
  std::shared_ptr<Clock> clock;
  /// Seed for jitter and retry jitter (0: from std::random_device).
  std::uint64_t random_seed = 0;
};

/// Where an entry's automatic fires run.
enum class EntryScope {
  fleet,    ///< once across the fleet: claimed and leader-gated as the scheduler coordinates
  replica,  ///< on every replica: never claimed or leader-gated; no cursor, catch-up or recovery
};

/// Per-entry settings; unset optionals inherit the scheduler's.
struct FLEETCRON_API EntryOptions {
  std::string name;  ///< label for logs and trigger_by_name(); any text
  /// Identity for fire keys (trimmed; unique per scheduler; required with a
  /// claimer). Up to 1,024 bytes, no '@' or control characters.
  std::string key;
  /// Bounds the whole run, every attempt and retry delay included: past
  /// it the run is asked to stop and ends timed_out, with no more attempts.
  /// 0 = none.
  std::chrono::nanoseconds timeout{0};
  /// Bounds each attempt: an attempt past it is asked to stop (its stop
  /// token), counts as timed out, and is retried like a failure while the
  /// retry policy allows. 0 = none. The daemon's `timeout=` is this.
  std::chrono::nanoseconds attempt_timeout{0};
  std::optional<std::chrono::nanoseconds> jitter;
  std::optional<RetryPolicy> retry;
  std::optional<MissedFirePolicy> missed_fire;
  std::optional<DstPolicy> dst;  ///< for specs (add() with a string)
  /// The last instant known to have run (e.g. persisted before a restart):
  /// the first fire is next(last_run), so missed fires are caught up.
  std::optional<Instant> last_run;
  /// The scheduler's catch_up_reach unless set (0: no cursor, no catch-up).
  std::optional<std::chrono::nanoseconds> catch_up_reach;
  /// The scheduler's ledger_retention unless set.
  std::optional<LedgerRetention> ledger_retention;
  /// What the replica that finds a run of this entry lost does
  /// (docs/fleet-state.md#lost-runs): report it (default), or also run
  /// the fire again, once it claimed the recovery (a new fence), at most
  /// `recover_max` times per fire (1 to 10) and only while the fire is
  /// younger than `recover_within` (1 s to 7 days; default 1 h). The job
  /// sees FireContext::recovered_fence.
  RecoverPolicy recover = RecoverPolicy::report;
  std::chrono::nanoseconds recover_within = std::chrono::hours{1};
  int recover_max = 1;
  /// nullopt: the scheduler's claimer; nullptr: no claimer for this entry.
  std::optional<std::shared_ptr<Claimer>> claimer;
  /// Automatic fires while a run of this entry is still going (manual
  /// triggers always run).
  OverlapPolicy overlap = OverlapPolicy::allow;
  /// EntryScope::replica: each replica runs every fire itself (local
  /// cleanup, a cache warm-up), whatever the scheduler's claimer and
  /// elector; its key still names it in the ledger and the controls.
  EntryScope scope = EntryScope::fleet;
  /// Whether a run that fails after its last retry (failed or timed out,
  /// not cancelled; a trigger's run too) pauses the entry: here at once,
  /// and, for a keyed entry with the fleet's controls on, fleet-wide,
  /// recorded as paused by "on-failure@" and this replica's id (written by
  /// the controls' thread, tried again at each poll while the store
  /// fails). resume() here, or the fleet's resume, runs it again. The
  /// run's JobCompletedEvent says it paused the entry.
  bool pause_on_failure = false;
};

/// A snapshot of one entry.
struct FLEETCRON_API EntrySnapshot {
  EntryId id = 0;
  std::string name;
  std::string key;
  std::string spec;  ///< empty for schedules built in code
  std::optional<Instant> prev;
  std::optional<Instant> next;
  bool paused = false;
};

/// The outcome of trigger_and_wait().
struct FLEETCRON_API RunOutcome {
  RunStatus status = RunStatus::succeeded;
  int attempts = 0;
  std::string error;
};

/// Errors from Scheduler methods (besides ParseError from add() with a spec
/// and std::invalid_argument for bad options).
class FLEETCRON_API SchedulerError : public std::runtime_error, public Error {
 public:
  [[nodiscard]] const char* what() const noexcept override { return std::runtime_error::what(); }
  enum class Code {
    entry_not_found,
    duplicate_key,
    claimer_requires_key,
    capacity_reached,
    not_running,
    stopped,
    queue_full,
  };
  SchedulerError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] Code code() const noexcept { return code_; }

 private:
  Code code_;
};

/// Runs jobs on schedules. Every method is thread-safe, including from
/// inside a job. Nothing fires before start(). The loop thread never runs
/// jobs, observers or backend calls (the recorder excepted); jobs run on
/// `max_concurrent` worker threads. See docs/scheduler.md.
class FLEETCRON_API Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});
  /// Stops (as stop() with no deadline) if still running.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Parses `spec` (the scheduler's zone and seconds setting, the entry's
  /// DST policy) and adds the entry. Throws ParseError, SchedulerError
  /// (duplicate_key, claimer_requires_key, capacity_reached, stopped) or
  /// std::invalid_argument (bad option, empty job).
  /// With a claimer or an elector, `@every D` counts from the Unix epoch
  /// (EveryAnchor::epoch), so every replica computes the same instants; a
  /// process-anchored every() schedule is refused (std::invalid_argument).
  EntryId add(std::string_view spec, Job job, EntryOptions options = {});
  EntryId add(SchedulePtr schedule, Job job, EntryOptions options = {});
  /// Throws what add() would throw for this entry — ParseError,
  /// std::invalid_argument, SchedulerError(claimer_requires_key) — without
  /// adding it. It checks every rule that depends on the entry alone (not
  /// duplicate keys or capacity), so a reload can check each new entry
  /// before it changes anything.
  void check(std::string_view spec, const EntryOptions& options) const;
  void check(const SchedulePtr& schedule, const EntryOptions& options) const;

  /// Removes the entry; its running and queued fires get stop requested.
  /// Throws SchedulerError(entry_not_found).
  void remove(EntryId id);
  /// Stops automatic fires; trigger() still works. Idempotent.
  void pause(EntryId id);
  /// Resumes from now: nothing missed while paused is replayed. Idempotent.
  /// A pause is this process's: with a fleet state, instants that every
  /// replica skipped while paused do not move the cursor, so a replica
  /// started later (not paused) may catch them up.
  void resume(EntryId id);
  /// Replaces the schedule; keeps id, options and the previous fire. The
  /// next fire is computed from now.
  void update(EntryId id, std::string_view spec);
  void update(EntryId id, SchedulePtr schedule);

  /// Runs the entry now on this process: no jitter, no coordination.
  /// Throws SchedulerError (entry_not_found, not_running, queue_full).
  void trigger(EntryId id);
  /// As trigger(), then waits for the run's outcome, at most `wait`
  /// (on the scheduler's clock); nullopt if it did not finish in time.
  std::optional<RunOutcome> trigger_and_wait(EntryId id, std::chrono::nanoseconds wait);
  /// Triggers every entry with this name; returns how many.
  std::size_t trigger_by_name(std::string_view name);

  [[nodiscard]] std::optional<EntrySnapshot> entry(EntryId id) const;
  /// All entries, ordered by next fire (none last). Copied in small
  /// batches, so it never holds the scheduler's lock for long.
  [[nodiscard]] std::vector<EntrySnapshot> entries() const;
  [[nodiscard]] std::size_t size() const;
  /// Fires queued for a worker (those a worker took out for a claim round
  /// trip included: they count against `limits.max_queued`), and workers
  /// deciding, waiting to start (overlap) or running a fire, now. A fire
  /// counts as running until its worker is free again: after its
  /// JobCompletedEvent, and after its job is free for the next fire
  /// (overlap), so a caller that waits for `running` to fall knows both.
  /// Not from a Claimer's methods: some are called under the queue's lock.
  [[nodiscard]] QueueDepthEvent queue_depth() const;

  /// Starts the loop and the workers. Idempotent while running; throws
  /// SchedulerError(stopped) after stop() or drain().
  void start();
  /// Stops scheduling, requests stop on every running job, cancels queued
  /// fires, and waits until `deadline` (steady time of the scheduler's
  /// clock) for running jobs to return. Returns true if they all did.
  /// Called from a job, it does not wait for that job (it returns whether
  /// all the others finished); threads are then joined by a later stop()
  /// or the destructor. Concurrent calls are safe.
  bool stop(Clock::SteadyTime deadline);
  /// Stops scheduling, lets queued and running fires finish, waiting until
  /// `deadline`; then behaves as stop(). Returns true if all finished.
  bool drain(Clock::SteadyTime deadline);

  [[nodiscard]] Clock& clock() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron
