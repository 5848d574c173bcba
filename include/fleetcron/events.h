// fleetcron — what the scheduler reports: typed events and their sinks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

using EntryId = std::uint64_t;

/// Who an event is about. Shared, immutable for the life of the entry.
struct FLEETCRON_API EntryIdentity {
  EntryId id = 0;
  std::string name;
  std::string key;
};
using EntryRef = std::shared_ptr<const EntryIdentity>;

/// What the replica that finds a run lost does with the fire.
enum class RecoverPolicy {
  report,  ///< report it lost (a ledger record, a log line, a LostFireEvent)
  rerun,   ///< report it, and run the fire again (EntryOptions::recover)
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(RecoverPolicy policy) noexcept;

/// What to do with fires later than the missed-fire tolerance.
enum class MissedFirePolicy {
  run_once,  ///< run the most recent missed instant once (default)
  skip,      ///< run nothing; continue with the next instant after now
  run_all,   ///< run each missed instant, the newest 1,000 at most, oldest first
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(MissedFirePolicy policy) noexcept;

/// Why an automatic fire did not run.
enum class SkipReason {
  unknown,          ///< not set (a default-constructed event); the scheduler never reports it
  not_leader,       ///< the elector said follower
  election_error,   ///< the elector failed (fail closed)
  already_claimed,  ///< another replica claimed the fire
  claim_error,      ///< the claimer failed (fail closed)
  clock_skew,       ///< the claimer refused: local clock too far from the store's (fail closed)
  overlap,          ///< the previous run still goes (OverlapPolicy skip, or queue with one waiting already)
  stale,            ///< older than the claimer's dedup window: another replica's claim may have expired
  store_reset,      ///< the claimer refused: scheduled before the store's reset epoch + skew bound
  fleet_settings,   ///< this replica's settings are not the fleet's, or not verified yet (the replica registry)
  registry_error,   ///< fleet-wide overlap could not be checked: the replica registry failed (fail closed)
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(SkipReason reason) noexcept;

/// Why a fire was dropped before its job started.
enum class CancelReason {
  unknown,               ///< not set (a default-constructed event); the scheduler never reports it
  scheduler_stopped,     ///< stop()/drain() with the fire queued or starting
  entry_removed,         ///< remove() (or a reload) while the fire was queued
  entry_paused,          ///< pause() while the fire was queued
  stopped_before_start,  ///< its run was asked to stop during jitter, before the claim or before the job
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(CancelReason reason) noexcept;

/// How a run ended.
enum class RunStatus {
  succeeded,
  failed,     ///< the job threw (every attempt, when retrying)
  timed_out,  ///< the entry's timeout, or the last attempt's attempt_timeout, requested stop first
  cancelled,  ///< stop(), leadership loss or removal requested stop first
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(RunStatus status) noexcept;

/// What a job may tell of its run beyond success or failure (the daemon's
/// commands: exit status or signal, and the end of their output). The
/// run's JobCompletedEvent and its ledger record carry it.
struct FLEETCRON_API RunDetails {
  std::optional<int> exit_status;
  std::optional<int> signal;
  /// The last bytes of the output; the ledger keeps up to 4 KiB of it.
  std::string output_tail;
};

/// A fire was planned: the entry's next instant (on add, update, resume and
/// after each committed fire).
struct FLEETCRON_API ScheduledEvent {
  EntryRef entry;
  Instant next;
};
/// An attempt of a run began.
struct FLEETCRON_API JobStartedEvent {
  EntryRef entry;
  std::string fire_key;
  Instant scheduled_at;
  Instant started_at;
  int attempt = 1;
  std::uint64_t fence = 0;
  bool manual = false;
  int recovery = 0;  ///< as in FireContext: n for the n-th re-run of a lost run
};
/// An attempt failed or timed out, and the retry policy runs another after
/// `retry_in` (the last attempt's end is the JobCompletedEvent).
struct FLEETCRON_API JobAttemptFailedEvent {
  EntryRef entry;
  std::string fire_key;
  Instant scheduled_at;
  int attempt = 1;
  RunStatus status = RunStatus::failed;  ///< failed, or timed_out (the entry's attempt_timeout)
  std::string error;
  std::chrono::nanoseconds retry_in{0};
};

/// A run ended (after its last attempt).
struct FLEETCRON_API JobCompletedEvent {
  EntryRef entry;
  std::string fire_key;
  Instant scheduled_at;
  std::chrono::nanoseconds duration{0};
  RunStatus status = RunStatus::succeeded;
  int attempts = 1;
  std::string error;  ///< the last attempt's error; empty on success
  bool manual = false;
  Instant started_at{};     ///< the first attempt's start
  std::uint64_t fence = 0;  ///< as in FireContext
  RunDetails details{};     ///< what the last attempt told of itself
  int recovery = 0;         ///< as in FireContext: n for the n-th re-run of a lost run
  bool paused = false;      ///< this failure paused the entry (EntryOptions::pause_on_failure)
};
/// A popped fire was later than the tolerance, or (`catch_up`) the fleet
/// state's cursor showed instants that the whole fleet missed while it was
/// down. `missed` instants in [first_missed, last_missed] were due (counted
/// up to 1,000; beyond that `missed_is_lower_bound` is set); the policy
/// queued `runs` of them to run here (a catch-up: those whose claims this
/// replica won). Each queued instant's own events say whether it ran (an
/// overlap skip, a failure). A catch-up is published by the one replica
/// that won it.
/// `newest_missed` (a replica's own late loop only, not a catch-up): the
/// newest missed instants, oldest first — all of them up to 1,000; beyond,
/// run-all's 1,000 or else only `last_missed`.
struct FLEETCRON_API MissedFireEvent {
  EntryRef entry;
  Instant first_missed;
  Instant last_missed;
  std::uint64_t missed = 0;
  bool missed_is_lower_bound = false;
  std::uint64_t runs = 0;
  std::chrono::nanoseconds lateness{0};
  MissedFirePolicy policy = MissedFirePolicy::run_once;
  bool catch_up = false;
  std::vector<Instant> newest_missed;
  /// A catch-up that runs fewer instants than its policy chose says why
  /// ("catch-up-unknown: …", "… older than the claims' dedup window");
  /// empty otherwise.
  std::string withheld;
};
/// A fire found no room: the run queue was full.
struct FLEETCRON_API RejectedFireEvent {
  EntryRef entry;
  Instant scheduled_at;
  bool manual = false;
};
/// A fire was dropped before its job started (stop during jitter, entry
/// removed or paused while queued, scheduler stopped with it queued).
/// `claimed`: a claimer had granted it to this replica, so no replica will
/// run it — a loss to report, not a skip.
struct FLEETCRON_API CancelledFireEvent {
  EntryRef entry;
  Instant scheduled_at;
  std::string cause;
  CancelReason reason = CancelReason::unknown;
  bool claimed = false;
};
/// An automatic fire was skipped by coordination.
struct FLEETCRON_API SkippedFireEvent {
  EntryRef entry;
  std::string fire_key;
  Instant scheduled_at;
  SkipReason reason = SkipReason::unknown;
  std::string error;  ///< for election_error, claim_error, clock_skew and stale
};
/// Fires queued for a worker (those out for a claim round trip included)
/// and workers deciding or running one, after fires were queued; at any
/// time: Scheduler::queue_depth().
struct FLEETCRON_API QueueDepthEvent {
  std::size_t queued = 0;
  std::size_t running = 0;
};
/// This replica led, but its claims kept failing (errors, clock skew) for
/// `failing_for`: it stopped leading (Elector::set_liveness) and stays out
/// of the election for `hold`, so a replica that can claim takes over.
struct FLEETCRON_API LeadershipStepDownEvent {
  std::chrono::nanoseconds failing_for{0};
  std::chrono::nanoseconds hold{0};
  std::string last_error;
};
/// A run of another replica was lost: that replica's registry record
/// expired while it listed the run (it died, hung, or lost the store for
/// longer than a record lives). Published by the one replica whose
/// announcement dropped the record (docs/fleet-state.md#lost-runs).
struct FLEETCRON_API LostFireEvent {
  std::string job_key;
  std::string fire_key;
  Instant scheduled_at{};
  std::string replica_id;  ///< the runner that was lost
  std::string host;
  std::uint64_t fence = 0;
  Instant started_at{};
  Instant last_beat{};  ///< the runner's last announcement, on its clock
  /// Whether this replica runs the fire again (EntryOptions::recover), and
  /// why not when it does not ("" when it does).
  bool rerun = false;
  std::string not_rerun;
  Instant expired_at{};  ///< when the runner's record expired, on the store's clock
};
/// A trigger (Scheduler::trigger through the fleet state, `fleetcron
/// trigger`) that no replica took before it expired: it did not run.
/// Published by the replica that dropped it from the fleet state.
struct FLEETCRON_API TriggerExpiredEvent {
  std::string job_key;
  std::string trigger_id;
  std::string requested_by;
  Instant requested_at{};  ///< on the store's clock
  Instant expires_at{};    ///< on the store's clock
  /// Empty, or what is uncertain about it (the drop's answer was lost).
  std::string note;
};
/// Observers could not keep up; `dropped` events were discarded so far.
/// The recorder gets one per dropped event; the observers get one when the
/// queue has room again, before the events that follow the gap.
struct FLEETCRON_API ObserverDropEvent {
  std::uint64_t dropped = 0;
};

using Event = std::variant<ScheduledEvent, JobStartedEvent, JobCompletedEvent, MissedFireEvent, RejectedFireEvent,
                           CancelledFireEvent, SkippedFireEvent, QueueDepthEvent, ObserverDropEvent,
                           LeadershipStepDownEvent, JobAttemptFailedEvent, LostFireEvent, TriggerExpiredEvent>;

/// Receives events. Observers run on one background thread, in order, fed
/// by a bounded queue that drops (and counts) rather than block the
/// scheduler. The recorder runs inline, on whichever scheduler thread made
/// the event (the loop included): it must be fast, thread-safe and must not
/// block — it is meant for counters and histograms. Exceptions thrown by
/// either are caught and logged.
class FLEETCRON_API Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_event(const Event& event) = 0;

 protected:
  Observer() = default;
};

}  // namespace fleetcron
