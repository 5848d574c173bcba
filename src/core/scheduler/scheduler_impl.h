// Internal: the scheduler's state, shared by the files that implement it
// (see the comment on Scheduler::Impl for which does what, and the locks).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/scheduler/catch_up_queue.h"
#include "core/support/log_quota.h"
#include "core/scheduler/claim_path.h"
#include "core/scheduler/entry.h"
#include "core/scheduler/entry_heap.h"
#include "core/support/describe_exception.h"
#include "core/scheduler/event_bus.h"
#include "core/scheduler/fire.h"
#include "core/scheduler/fire_queue.h"
#include "core/scheduler/fleet_controls.h"
#include "core/scheduler/fleet_upkeep.h"
#include "core/scheduler/run_queue.h"
#include "core/scheduler/leader_fitness.h"
#include "core/scheduler/ledger_writer.h"
#include "core/scheduler/missed_fires.h"
#include "core/scheduler/random_delays.h"
#include "core/scheduler/registry_membership.h"
#include "core/scheduler/run_state.h"
#include "core/scheduler/runs_in_progress.h"
#include "fleetcron/scheduler.h"
#include "fleetcron/store_clock.h"

namespace fleetcron {

/// The scheduler's state and its threads: the entry table and the loop
/// (scheduler.cpp), the workers (dispatch.cpp) over the run queue, the
/// claim path (ClaimPath), the runs (run.cpp), the catch-ups
/// (catch_up.cpp), start and stop (lifecycle.cpp). Its
/// components own their state and lock: RunQueue, EventBus, LedgerWriter,
/// ClaimPath, CatchUpQueue, FleetControls, RegistryMembership, FleetUpkeep,
/// LeaderFitness, RunsInProgress; the loop's EntryHeap is guarded by mutex_.
///
/// Lock order: a lock is taken only while holding locks to its left in
///   join_mutex_ < the components' join locks (RunsInProgress::, FleetUpkeep::join_mutex_: held only across their joins) < FleetControls::poll_mutex_ < CursorTracking::busy < LeadershipGuard::mutex < LeadershipGuard::liveness_mutex < RegistryMembership::announce_mutex_ < mutex_ < RunQueue::mutex_ < RunsInProgress::mutex_ < WorkerSlot::mutex < the leaves
///   (FleetUpkeep::mutex_, FleetControls::requested_mutex_, RandomDelays::mutex_, OverlapState::mutex, CursorTracking::mutex, the other components' locks), which take only the Clock's.
/// (Beside it: stop() called from user code under LeadershipGuard::mutex or CursorTracking::busy takes poll_mutex_ and join_mutex_; it never waits there for that thread.)
/// No scheduler lock is held while user code runs (jobs, claimers,
/// electors, observers, the recorder, the logger), except that
/// Schedule::next() runs under mutex_, and that an entry's
/// CursorTracking::busy (a flag held like a lock) is held across its
/// catch-up's calls (elector, fleet state, claimer, recorder, logger): it
/// keeps the entry's own fires from passing its cursor meanwhile, and a
/// fire waits for it at most catch_up_wait.
class FLEETCRON_LOCAL Scheduler::Impl {
 public:
  explicit Impl(SchedulerOptions options);
  ~Impl();

  // ---- entries (scheduler.cpp)
  EntryId add(SchedulePtr schedule, Job job, EntryOptions options);
  /// Every rule add() applies to the entry alone; trims the key, returns
  /// the entry's settings. Throws as add().
  std::shared_ptr<const detail::EntrySettings> prepare(const SchedulePtr& schedule, EntryOptions& options) const;
  /// Parses with the scheduler's options, the entry's DST policy, and
  /// `@every` from the epoch when the entry is coordinated.
  SchedulePtr parse(std::string_view spec, const EntryOptions& entry) const;
  SchedulePtr parse(std::string_view spec, const std::optional<DstPolicy>& dst, bool coordinated) const;
  /// Whether the entry has a claimer or the scheduler an elector.
  bool coordinated(const EntryOptions& entry) const;
  bool coordinated(EntryId id) const;
  void remove(EntryId id);
  void set_paused(EntryId id, bool paused);
  /// As set_paused(), without throwing: nullopt if there is no such
  /// entry, else whether it changed (false: it already was so).
  std::optional<bool> change_paused(EntryId id, bool paused);
  void update(EntryId id, SchedulePtr schedule);
  detail::Fire make_manual_fire(EntryId id);
  std::optional<RunOutcome> trigger_and_wait(EntryId id, std::chrono::nanoseconds wait);
  std::size_t trigger_by_name(std::string_view name);
  std::optional<EntrySnapshot> snapshot(EntryId id) const;
  std::vector<EntrySnapshot> snapshots() const;
  std::size_t size() const;

  // ---- lifecycle (lifecycle.cpp)
  void start();
  void start_locked();  // mutex_ held
  bool stop(Clock::SteadyTime deadline, bool drain_first);
  /// What Elector::set_liveness() reports: the loop passes, and this
  /// replica is not stepping down after its leader-gated claims kept failing.
  bool fit_to_lead() const;
  void join_threads_once();
  void detach_elector();
  /// Detaches and resigns the elector, once (stop(), drain() and the join).
  void resign_once();

  // ---- the run queue and the workers (dispatch.cpp)
  /// Queues fires for the workers. What does not fit stays in `fires`
  /// (with an event): rejected when the queue is full, cancelled when the
  /// scheduler is stopping. Returns true if it was stopping.
  bool enqueue(std::vector<detail::Fire>& fires);
  void worker_main(detail::WorkerSlot& slot);
  /// Reports the fires chained after `fire` (a catch-up's, run one after
  /// another) as cancelled (stopping) or rejected, and drops them.
  void drop_chain(detail::Fire& fire, bool stopping);
  /// Whether a fire may share a claim round trip with the fires due with
  /// it: automatic, queued, with a claimer, no jitter, overlap allowed or
  /// skipped fleet-wide (Entry::batchable).
  static bool batchable(const detail::Fire& fire);
  /// Drops (skipped `overlap`) the fires of a claim batch whose job runs here now.
  void skip_busy_here(std::vector<detail::Fire>& batch);
  /// The run queue's rule for claim batches: batchable fires of one
  /// claimer, none already too old to claim.
  detail::RunQueue::BatchRule batch_rule();
  /// Decides `fire` and the `batch` taken with it in one round trip; puts
  /// the granted ones back at the queue's front, each with its reserved
  /// worker, then the `looked` ones not claimed elsewhere. Returns whether
  /// `fire` (the worker's own) was granted.
  bool decide_batch(detail::Fire& fire, std::vector<detail::Fire>& batch, std::vector<detail::Fire>& looked);
  /// The most fires decided by one claim_batch() call, and looked at by
  /// one already_claimed() call.
  static constexpr std::size_t claim_batch_limit = 1024;

  // ---- the claim path (ClaimPath, claim_path.cpp; hosted in decide.cpp):
  // every automatic fire passes through claims_->screen() and ->claim().
  class ClaimHost;
  std::unique_ptr<detail::ClaimPath> make_claim_path();
  void report_skip(const detail::Fire& fire, SkipReason reason, std::string error);
  void report_cancel(const detail::Fire& fire, std::string cause, CancelReason reason);
  void on_leadership_lost(std::uint64_t term);

  // ---- the fleet state's cursors and catch-up (catch_up.cpp)
  /// Gives a keyed entry its cursor tracking when the scheduler has a
  /// fleet state (add(), under mutex_, after the entry's first instant).
  void track_cursor(detail::Entry& entry, Instant now);
  /// The digest and keep-for of the entry's current schedule (mutex_ held).
  void refresh_cursor_settings(detail::Entry& entry, Instant now);
  /// Hands the entry to the catch-up thread, unless it is caught up.
  void queue_catch_up(const std::shared_ptr<detail::Entry>& entry);
  /// A fire of the loop skipped with no lease held here: the entry's
  /// catch-up reaches up to its instant (queued again if it had completed).
  void note_unled(const detail::Fire& fire);
  /// The catch-up thread's queue: catches up the entries handed to it,
  /// retrying each failure after a backoff (1 s doubling to 30 s); null
  /// without a fleet state.
  std::unique_ptr<detail::CatchUpQueue> make_catch_up_queue();
  /// The cursors of the catch-ups due together, in one FleetState::read_cursors();
  /// each catch-up takes its own (once) instead of reading it alone.
  void prefetch_cursors(std::span<const std::shared_ptr<detail::Entry>> entries);
  std::optional<CursorRead> take_prefetched_cursor(const std::string& key);
  std::mutex prefetched_mutex_;  // a leaf; guards prefetched_cursors_
  std::unordered_map<std::string, CursorRead> prefetched_cursors_;
  /// Fleet-wide controls: a component (FleetControls) that sees the
  /// scheduler through ControlsHost (upkeep.cpp); null without them.
  [[nodiscard]] bool controls_on() const;
  class ControlsHost;
  std::unique_ptr<detail::FleetControls> make_controls();
  /// The replica registry: a component (RegistryMembership) that sees the
  /// scheduler through RegistryHost (registry.cpp); null without it.
  [[nodiscard]] bool registry_on() const;
  class RegistryHost;
  std::unique_ptr<detail::RegistryMembership> make_membership();
  /// Why coordinated fires are refused here, empty when they are not.
  [[nodiscard]] std::string settings_refusal();
  /// The refusal, "" when accepted (or no registry), nullopt when accepted
  /// longer ago than a record lives.
  [[nodiscard]] std::optional<std::string> registry_verdict() const;
  /// The store's clock (StoreClock), or this replica's without a fleet state.
  [[nodiscard]] Instant fleet_now();
  /// A run's job starts: listed in the registry from the next announcement,
  /// or, `awaiting_fleet`, once enter_fleet_overlap() wrote it.
  void note_running(detail::Run& run, detail::WorkerSlot& slot, const FireContext& context, bool awaiting_fleet);
  /// Fleet-wide overlap (fleet_overlap.cpp): whether the fire's entry
  /// limits overlap across the fleet (a coordinated, keyed entry with
  /// overlap skip or queue, and the registry on; not a manual run).
  [[nodiscard]] bool fleet_overlap_applies(const detail::Fire& fire) const;
  /// Lists the run in this replica's record if no other replica lists a
  /// run of its job, in one compare-and-swap; skips it (overlap=skip) or
  /// waits (queue) otherwise. False (reported) if skipped or stopped.
  bool enter_fleet_overlap(const detail::Fire& fire, detail::Run& run, detail::WorkerSlot& slot,
                           const FireContext& context);
  /// The runs in progress here, oldest first, at most max_listed_runs.
  [[nodiscard]] std::vector<RunningFire> running_fires();
  /// Reports the runs of replicas whose records this announcement found
  /// expired as lost: a log line and a LostFireEvent each (its ledger
  /// record is the event's, written by the LedgerWriter).
  void report_lost(const std::vector<ReplicaRecord>& expired);
  /// Queues the lost run's fire again, as its entry's recover policy says;
  /// answers why it does not ("" when it does).
  [[nodiscard]] std::string rerun_lost(const RunningFire& run);
  /// Adds or removes (the same call) a keyed entry's part of the jobs digest (mutex_ held).
  void toggle_jobs_digest(const detail::Entry& entry);
  /// Pauses or resumes the entry (mutex_ held), as set_paused().
  void set_paused_locked(const std::shared_ptr<detail::Entry>& entry, bool paused, std::vector<Event>& events);
  struct CatchUpOutcome {
    bool done = false;
    std::string error{};
    bool quiet = false;  // an expected wait (a follower, a paused entry, a stop): retried without a warning
  };
  /// Catches the entry up, once: reads its cursor, and if the fleet missed
  /// instants before this replica's first one, wins the compare-and-set
  /// for them (or learns that another replica did) and queues those its
  /// missed-fire policy runs. Waits at most `wait` for another thread
  /// catching the same entry up.
  CatchUpOutcome catch_up(const std::shared_ptr<detail::Entry>& entry, std::chrono::nanoseconds wait);
  /// How long a fire waits for its entry's catch-up under way elsewhere.
  static constexpr std::chrono::nanoseconds catch_up_wait = std::chrono::seconds{1};
  detail::LogQuota no_cursor_quota_{20, std::chrono::minutes{1}};
  struct CatchUpPlan {
    detail::MissedPlan missed;  // every instant missed within the reach; `runs` what runs here
    std::size_t withheld = 0;   // runs left out: older than the dedup window (catch_up_beyond_dedup_window off)
    std::uint64_t digest = 0;   // of the schedule the plan was made with
  };
  /// The instants after `seen` and before the entry's first instant here,
  /// within its reach, and which of them run; nullopt if there are none.
  std::optional<CatchUpPlan> plan_catch_up(const detail::Entry& entry, const JobCursor& seen);
  /// A catch-up claim whose answer was an error: true (and `answer` set to
  /// what the store did) if the cursor now holds this replica's claim.
  bool settle_unanswered(const std::string& key, const JobCursor& seen, const CatchUpPlan& plan, CatchUpClaim& answer);
  void run_catch_up(const std::shared_ptr<detail::Entry>& entry, const JobCursor& seen, const CatchUpPlan& plan,
                    const detail::Grant& grant);
  /// The cursor came from an earlier store epoch (`epoch` is the store's
  /// now): the range is logged and published, nothing runs.
  void report_unknown_catch_up(const std::shared_ptr<detail::Entry>& entry, const JobCursor& seen,
                               const detail::MissedPlan& missed, const std::string& epoch);
  /// Empty when the fire's entry is caught up (catching it up first if it
  /// is not); otherwise why the fire must not be claimed yet.
  std::string catch_up_pending(const detail::Fire& fire);
  /// Advances the cursors of the granted automatic fires before they run
  /// (one advance_cursors() call); drops (and reports) those whose cursor
  /// fails (fail closed), or advanced after the fire's dedup window.
  void advance_cursors(std::span<detail::Fire> fires);
  /// FleetState::advance_cursors() for these fires; a throw or a wrong
  /// number of answers fails every one.
  std::vector<CursorAdvance> ask_fleet_state(std::span<detail::Fire* const> fires);
  /// Marks a removed entry's cursor removed, at now (remove()).
  void write_tombstone(const detail::Entry& entry);

  // ---- runs (run.cpp)
  class RunListing;
  class RunRegistration;
  class NextInChain;
  /// From a worker's fire to its end: registration, the claim path for a
  /// fire not decided in a batch, the job with its retries, the events.
  void execute(detail::Fire& fire, detail::WorkerSlot& slot);
  /// execute()'s second half, once the fire may run: the fleet-wide
  /// overlap, the job with its retries and its timeout, the completion.
  void run_job(detail::Fire& fire, detail::Run& run, detail::WorkerSlot& slot, RunRegistration& registration,
               detail::OverlapSlot& overlap);
  /// Reports `fire` cancelled before its job started and ends its run.
  void cancel_run(detail::Fire& fire, RunRegistration& registration, std::string cause, CancelReason reason);
  /// The claim path of the worker's own automatic fire: for one granted
  /// by a claim batch, a last look at its age; otherwise elector, jitter,
  /// overlap, then screen() and claim() as a batch of one. False if the
  /// fire was skipped or cancelled (and reported).
  bool decide(detail::Fire& fire, detail::Run& run, detail::WorkerSlot& slot, detail::OverlapSlot& overlap);
  /// The overlap check of an automatic fire of an entry that limits
  /// overlap; false (reported) if it is skipped or stopped.
  /// Whether a failed attempt's retries end because the job was paused
  /// (run.cpp); notes why in `outcome` and the log.
  bool retries_paused(const detail::Entry& entry, const FireContext& context, RunOutcome& outcome);
  bool pass_overlap(detail::Fire& fire, detail::Run& run, detail::OverlapSlot& overlap);
  /// Registers the run's leadership term; false (reported) if it was lost.
  bool hold_term(const detail::Fire& fire, detail::Run& run, detail::WorkerSlot& slot);
  /// EntryOptions::pause_on_failure: pauses the entry of a run that failed
  /// after its last retry, here and (keyed, controls on) fleet-wide;
  /// whether it did.
  bool pause_after_failure(const detail::Entry& entry, const std::string& fire_key, const RunOutcome& outcome);
  /// The end of a run: the warning for a failure, the entry's last run,
  /// the completion event, the outcome for trigger_and_wait().
  void finish_run(detail::Entry& entry, const detail::Fire& fire, FireContext& context, RunOutcome outcome,
                  Instant started_at, std::chrono::nanoseconds duration);
  /// Runs the job, retrying as the entry says; the outcome of its last attempt.
  RunOutcome run_attempts(const detail::Entry& entry, detail::Run& run, FireContext& context);
  /// One attempt of the job, with its own stop source when the entry has
  /// an attempt timeout; the job's exception, if it threw.
  std::exception_ptr run_attempt(const detail::Entry& entry, detail::Run& run, const FireContext& context);
  /// The overlap check of an automatic fire (settings->overlap not allow).
  enum class OverlapCheck { entered, skip, stopped };
  static OverlapCheck enter_overlap(const detail::Entry& entry, std::stop_token stop);
  /// Sleeps `duration` on the clock; false if `stop` was requested first.
  bool sleep_for(std::chrono::nanoseconds duration, std::stop_token stop);

  void publish(Event event);
  void log(LogLevel level, const std::string& message) const;

  SchedulerOptions options_;
  std::shared_ptr<Clock> clock_;
  // The store's clock, for every time the fleet state writes or compares
  // (registry, controls, catalogue); null without a fleet state.
  std::unique_ptr<StoreClock> store_clock_;
  ParseOptions parse_options_;
  std::shared_ptr<detail::LedgerWriter> ledger_;  // null without a fleet state or with options.fleet.ledger off
  // The registry's reads of the runs in progress, counted (RegistryHost::mark_runs_read()).
  std::atomic<std::uint64_t> runs_read_marks_{0};
  detail::EventBus events_;

  // ---- entries and the loop
  enum class State { created, running, stopping, stopped };
  mutable std::mutex mutex_;  // guards entries_, keys_, heap_, state_, next_id_, jobs_digest_, and Entry's mutable fields
  std::condition_variable loop_cv_;
  State state_ = State::created;
  EntryId next_id_ = 1;
  std::unordered_map<EntryId, std::shared_ptr<detail::Entry>> entries_;
  std::unordered_map<std::string, EntryId> keys_;
  detail::EntryHeap heap_;  // the entries' next instants, for the loop
  std::thread loop_thread_;
  void loop_main();
  /// Whether the loop passes and the replica is not stepping down.
  detail::LeaderFitness fitness_{clock_};
  /// Pops due entries, applies the missed-fire policy, plans next fires.
  void collect_due(Instant now, std::vector<detail::Fire>& fires, std::vector<Event>& events,
                   std::vector<std::string>& warnings);

  // ---- run queue and workers
  detail::RunQueue run_queue_;  // its own lock (RunQueue::mutex_)
  std::vector<std::thread> workers_;
  /// The runs in progress (a slot per worker), the timeout watchdog and
  /// the leadership terms lost: its own state and lock.
  detail::RunsInProgress runs_;
  /// Elect, screen, claim (it takes no scheduler lock); made by the
  /// constructor.
  std::shared_ptr<ClaimHost> claim_host_;  // what claims_ sees of this scheduler
  std::unique_ptr<detail::ClaimPath> claims_;

  // ---- shutdown: one thread joins; the elector callback never outlives us
  std::mutex join_mutex_;  // guards the joins and joined_
  bool joined_ = false;
  struct LeadershipGuard {
    std::recursive_mutex mutex;  // held while a callback runs; recursive: a callback may lead to stop()
    Impl* impl = nullptr;
    // The elector's liveness checks take only this (never held while
    // anything else is taken, or across a join): a lost callback holding
    // `mutex` may stop the scheduler, which joins the thread asking.
    std::mutex liveness_mutex;
    Impl* liveness_impl = nullptr;  // guarded by liveness_mutex
  };
  std::shared_ptr<LeadershipGuard> leadership_guard_ = std::make_shared<LeadershipGuard>();
  std::atomic<bool> resigned_{false};

  // ---- the fleet controls (upkeep.cpp), with a fleet state and options.fleet.controls
  std::shared_ptr<ControlsHost> controls_host_;      // what controls_ sees of this scheduler
  std::unique_ptr<detail::FleetControls> controls_;  // its own state and lock

  // ---- the replica registry (registry.cpp, lost_runs.cpp)
  std::shared_ptr<RegistryHost> registry_host_;              // what membership_ sees of this scheduler
  std::unique_ptr<detail::RegistryMembership> membership_;  // its own state and locks
  std::uint64_t jobs_digest_ = 0;  // guarded by mutex_: the keyed entries' keys and schedules
  /// The upkeep thread, with the controls or the registry on: polls the
  /// one, announces the other (its own thread and lock); null without both.
  /// After them: destroyed, and its thread joined, before they are.
  std::unique_ptr<detail::FleetUpkeep> upkeep_;

  std::shared_ptr<const detail::EntrySettings> default_settings_;  // shared by entries that set nothing

  // ---- jitter and retry backoff (its own lock, a leaf)
  detail::RandomDelays random_;

  // ---- the catch-up thread (CatchUpQueue), when there is a fleet state.
  // Last: destroyed first, its thread stopped and joined before any member
  // a catch-up uses is gone (were it not joined yet: CatchUpQueue::join()
  // skips the join on its own thread, a stop() from a catch-up's callback).
  std::unique_ptr<detail::CatchUpQueue> catch_up_queue_;  // its own state and lock
};

namespace detail {
/// Whether this thread is one of `impl`'s workers (stop() from a job does
/// not wait for, or join, its own thread).
bool on_worker_of(const void* impl);
/// Validates scheduler options; throws std::invalid_argument naming the
/// option and value. Fills defaults (clock, logger).
void validate(SchedulerOptions& options);
/// Trims the key and validates an entry's options (std::invalid_argument).
void check_entry_options(EntryOptions& entry);
/// An entry's settings after inheriting the scheduler's.
std::shared_ptr<const EntrySettings> resolve(const SchedulerOptions& scheduler, const EntryOptions& entry);
void validate_retry(std::string_view owner, const RetryPolicy& retry);
/// Identifies a schedule in a cursor: its spec and zone (0-like for
/// schedules built in code, which have no spec).
std::uint64_t schedule_digest(const Schedule& schedule);
/// How long an entry's cursor lives after each write: the catch-up reach
/// plus twice the schedule's gap between fires, 30 to 400 days.
inline constexpr std::chrono::nanoseconds cursor_min_keep_for = std::chrono::hours{24 * 30};
std::chrono::nanoseconds cursor_keep_for(const Schedule& schedule, Instant now, std::chrono::nanoseconds reach);
/// "replica-" and 16 random hex digits.
std::string random_replica_id();
}  // namespace detail

}  // namespace fleetcron
