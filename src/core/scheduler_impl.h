// Internal: the scheduler's state. scheduler.cpp holds the public methods
// and the loop; dispatch.cpp the workers, runs and the timeout watchdog.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/event_bus.h"
#include "fleetcron/scheduler.h"

namespace fleetcron {

namespace detail {

/// Options of one entry after inheriting the scheduler's. Immutable.
struct EntrySettings {
  std::chrono::nanoseconds timeout{0};
  std::chrono::nanoseconds jitter{0};
  std::optional<RetryPolicy> retry;
  MissedFirePolicy missed_fire = MissedFirePolicy::run_once;
  std::shared_ptr<Claimer> claimer;
  OverlapPolicy overlap = OverlapPolicy::allow;
};

/// An entry. identity, job and settings never change after add(); the rest
/// is guarded by Scheduler::Impl::mutex_, except the atomics.
struct Entry {
  EntryIdentity identity;  // shared out as EntryRef by aliasing the entry's shared_ptr (no extra allocation)
  Job job;
  std::shared_ptr<const EntrySettings> settings;
  SchedulePtr schedule;
  [[nodiscard]] static EntryRef ref(const std::shared_ptr<Entry>& entry) { return {entry, &entry->identity}; }

  /// The latest automatic fire that ran (ns since the epoch; min = none).
  /// Atomic so a finishing run never waits for the loop's lock.
  std::atomic<Instant::rep> prev{no_instant.time_since_epoch().count()};
  Instant next = no_instant;
  std::uint64_t generation = 0;  // bumped by update/pause/resume/remove: stale heap items are dropped
  std::atomic<bool> paused{false};  // written under mutex_; read by workers without it
  std::atomic<bool> removed{false};

  /// Overlap (settings->overlap other than allow): automatic runs of this
  /// entry past the overlap check and not yet ended, and whether a fire
  /// waits for them (queue).
  std::mutex overlap_mutex;  // guards active, waiting
  std::condition_variable_any overlap_cv;
  int active = 0;
  bool waiting = false;

  static constexpr Instant no_instant = Instant::min();
};

struct HeapItem {
  Instant at;
  std::uint64_t generation;
  std::shared_ptr<Entry> entry;
  // std::push_heap builds a max-heap: "greater" puts the earliest on top.
  friend bool operator<(const HeapItem& a, const HeapItem& b) { return a.at > b.at; }
};

/// Where trigger_and_wait() receives its run's outcome.
struct OutcomeSlot {
  std::mutex mutex;  // guards value
  std::condition_variable cv;
  std::optional<RunOutcome> value;
  void set(RunOutcome outcome) {
    std::lock_guard guard(mutex);
    value = std::move(outcome);
    cv.notify_all();
  }
};

/// What the elector and the claimer decided for an automatic fire.
struct Decision {
  bool leader_gated = false;  // an elector said leader
  std::uint64_t term = 0;
  std::uint64_t fence = 0;
};

/// A fire waiting for, or held by, a worker.
struct Fire {
  std::shared_ptr<Entry> entry;
  Instant scheduled_at;
  bool manual = false;
  std::shared_ptr<OutcomeSlot> outcome = nullptr;  // trigger_and_wait only
  bool batched = false;             // went through a claim batch: never batched again
  bool reserved = false;            // queued with a worker reserved for it (decided by a batch)
  std::optional<Decision> decided = std::nullopt;  // set by a claim batch: the run skips jitter, elector and claimer
};

/// A run in progress: what stop(), remove(), timeouts and leadership loss
/// need to reach it.
struct Run {
  std::stop_source stop;
  EntryId entry_id = 0;
  bool leader_gated = false;
  std::uint64_t term = 0;
  std::atomic<bool> timed_out{false};
};

}  // namespace detail

class Scheduler::Impl {
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
  void update(EntryId id, SchedulePtr schedule);
  std::shared_ptr<detail::Fire> make_manual_fire(EntryId id);
  std::optional<RunOutcome> trigger_and_wait(EntryId id, std::chrono::nanoseconds wait);
  std::size_t trigger_by_name(std::string_view name);
  std::optional<EntrySnapshot> snapshot(EntryId id) const;
  std::vector<EntrySnapshot> snapshots() const;
  std::size_t size() const;

  // ---- lifecycle (scheduler.cpp)
  void start();
  bool stop(Clock::SteadyTime deadline, bool drain_first);

  // ---- dispatch (dispatch.cpp)
  /// Queues fires for the workers. What does not fit stays in `fires`
  /// (with an event): rejected when the queue is full, cancelled when the
  /// scheduler is stopping. Returns true if it was stopping.
  bool enqueue(std::vector<detail::Fire>& fires);
  void worker_main();
  void watchdog_main();
  void execute(detail::Fire& fire);
  /// Whether a fire may join a claim batch: automatic, undecided, with a
  /// claimer and no jitter.
  static bool batchable(const detail::Fire& fire);
  /// Moves the queued fires that may share `first`'s claim round trip
  /// from the front of the queue into `batch` (queue_mutex_ held).
  void take_batch(const detail::Fire& first, std::vector<detail::Fire>& batch);
  /// Elector then one claim_batch() for `batch`; fires that must not run
  /// are reported and removed, the others carry their decision. Returns
  /// whether batch[0] (the worker's own fire) is still there, first.
  bool decide_batch(std::vector<detail::Fire>& batch);
  /// The claim round trip of decide_batch(): one claim_batch() for `keys`
  /// (the fires at `claiming`); refused or stale answers clear `keep`.
  void claim_decided(std::vector<detail::Fire>& batch, const std::vector<std::size_t>& claiming,
                     std::vector<std::string>& keys, std::vector<bool>& keep);
  /// The overlap check of an automatic fire (settings->overlap not allow).
  enum class OverlapCheck { entered, skip, stopped };
  static OverlapCheck enter_overlap(detail::Entry& entry, std::stop_token stop);
  /// Whether the fire is already older than its claimer's dedup window.
  bool stale_now(const detail::Fire& fire) const;
  /// Gives back `count` workers a claim batch reserved (committed_).
  void release_reservations(std::size_t count);
  /// Whether a claimer granted the fire to this replica (a claim batch).
  static bool claimed(const detail::Fire& fire);
  /// The most fires decided by one claim_batch() call.
  static constexpr std::size_t claim_batch_limit = 1024;
  /// Asks the elector (if any); nullopt with `skip` set means skip the fire.
  struct Verdict {
    std::optional<SkipReason> skip;
    std::string error;
    detail::Decision decision;
  };
  Verdict elect();
  /// Empty if the elector still says leader of `decided.term` (or the fire
  /// was not leader-gated); otherwise why the fire must be skipped.
  std::string leadership_changed(const detail::Decision& decided);
  void report_skip(const EntryRef& ref, const std::string& fire_key, Instant scheduled_at, SkipReason reason,
                   std::string error);
  void on_leadership_lost(std::uint64_t term);
  /// Sleeps `duration` on the clock; false if `stop` was requested first.
  bool sleep_for(std::chrono::nanoseconds duration, std::stop_token stop);
  std::chrono::nanoseconds random_below(std::chrono::nanoseconds bound);
  std::chrono::nanoseconds retry_delay(const RetryPolicy& retry, int failed_attempts);

  void publish(Event event);
  void log(LogLevel level, const std::string& message) const;

  SchedulerOptions options_;
  std::shared_ptr<Clock> clock_;
  ParseOptions parse_options_;
  detail::EventBus events_;

  // ---- entries and the loop
  enum class State { created, running, stopping, stopped };
  mutable std::mutex mutex_;  // guards entries_, keys_, heap_, state_, next_id_, and Entry's mutable fields
  std::condition_variable loop_cv_;
  State state_ = State::created;
  EntryId next_id_ = 1;
  std::unordered_map<EntryId, std::shared_ptr<detail::Entry>> entries_;
  std::unordered_map<std::string, EntryId> keys_;
  std::vector<detail::HeapItem> heap_;
  std::size_t stale_heap_items_ = 0;
  std::thread loop_thread_;
  void loop_main();
  /// The loop's passes; it passes at least every max_loop_sleep while running.
  std::atomic<std::uint64_t> loop_passes_{0};
  /// False once the loop has not passed for liveness_bound since a look
  /// found it without a new pass. Two looks, not one timestamp: after a
  /// pause (SIGSTOP) or a jump of a virtual clock every thread resumes at
  /// once, and the elector's thread may look before the loop has run.
  bool loop_alive() const;
  mutable std::mutex liveness_mutex_;  // guards seen_passes_, stale_since_
  mutable std::uint64_t seen_passes_ = 0;
  mutable std::optional<Clock::SteadyTime> stale_since_;
  /// What Elector::set_liveness() reports: the loop passes, and this
  /// replica is not stepping down after its leader-gated claims kept failing.
  bool fit_to_lead() const;
  /// Tracks the answers to leader-gated claims (both mode); steps down when
  /// errors and clock-skew refusals last claim_failure_step_down.
  void note_leader_claim(const ClaimResult& claim);
  std::atomic<Clock::SteadyTime::rep> claims_failing_since_{0};  // 0: the latest answer was a real one
  std::atomic<Clock::SteadyTime::rep> claims_last_failure_{0};
  std::atomic<Clock::SteadyTime::rep> stepped_down_until_{0};
  static constexpr std::chrono::nanoseconds claim_failure_step_down = std::chrono::seconds{5};
  static constexpr std::chrono::nanoseconds step_down_hold = std::chrono::seconds{30};
  /// Pops due entries, applies the missed-fire policy, plans next fires.
  void collect_due(Instant now, std::vector<detail::Fire>& fires, std::vector<Event>& events,
                   std::vector<std::string>& warnings);
  void push_heap(const std::shared_ptr<detail::Entry>& entry, std::vector<Event>* events);
  void compact_heap();

  // ---- run queue and workers
  mutable std::mutex queue_mutex_;  // guards queue_, running_count_, held_, committed_, workers_exit_
  std::condition_variable queue_cv_;  // workers wait for fires
  std::condition_variable idle_cv_;   // stop/drain wait for workers
  std::deque<detail::Fire> queue_;
  std::size_t running_count_ = 0;
  std::size_t held_ = 0;  // fires out of the queue in a claim batch, about to be put back
  // Workers deciding or running a fire, plus one reserved for each fire a
  // claim batch took (put back decided, `Fire::reserved`): never more than
  // the workers, so every claimed fire starts at once.
  std::size_t committed_ = 0;
  /// Whether an idle worker may take the queue's front (queue_mutex_ held).
  bool can_take_locked() const;
  bool workers_exit_ = false;
  std::vector<std::thread> workers_;

  // ---- runs in progress and the timeout watchdog
  std::mutex runs_mutex_;  // guards runs_, next_run_id_, timeouts_, watchdog_exit_
  std::condition_variable watchdog_cv_;
  std::unordered_map<std::uint64_t, std::shared_ptr<detail::Run>> runs_;
  std::uint64_t next_run_id_ = 1;
  std::multimap<Clock::SteadyTime, std::uint64_t> timeouts_;
  bool watchdog_exit_ = false;
  bool runs_stopping_ = false;      // set by stop(): runs registering later are stopped at once
  // The leadership terms reported lost, newest last (at most
  // max_lost_terms): only these are refused. Not "every term up to the
  // highest": NATS terms are revisions, and a recreated bucket starts
  // again at 1, below every term lost before it.
  std::deque<std::uint64_t> lost_terms_;
  static constexpr std::size_t max_lost_terms = 64;
  bool term_lost_locked(std::uint64_t term) const;
  std::thread watchdog_thread_;
  void request_stop_where(const std::function<bool(const detail::Run&)>& match, bool mark_timed_out);

  // ---- shutdown: one thread joins; the elector callback never outlives us
  std::mutex join_mutex_;  // guards the joins and joined_
  bool joined_ = false;
  void join_threads_once();
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
  void detach_elector();
  /// Detaches and resigns the elector, once (stop(), drain() and the join).
  void resign_once();
  std::atomic<bool> resigned_{false};

  std::shared_ptr<const detail::EntrySettings> default_settings_;  // shared by entries that set nothing

  // ---- randomness for jitter
  std::mutex random_mutex_;  // guards random_
  std::mt19937_64 random_;
};

namespace detail {
/// Validates scheduler options; throws std::invalid_argument naming the
/// option and value. Fills defaults (clock, logger).
void validate(SchedulerOptions& options);
/// Trims the key and validates an entry's options (std::invalid_argument).
void check_entry_options(EntryOptions& entry);
/// An entry's settings after inheriting the scheduler's.
std::shared_ptr<const EntrySettings> resolve(const SchedulerOptions& scheduler, const EntryOptions& entry);
void validate_retry(std::string_view owner, const RetryPolicy& retry);
}  // namespace detail

}  // namespace fleetcron
