// Internal: an entry of the scheduler as the loop and the workers see it —
// its settings, its overlap bookkeeping, its place in the loop's heap.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

/// Options of one entry after inheriting the scheduler's. Immutable.
struct EntrySettings {
  std::chrono::nanoseconds timeout{0};          // the whole run
  std::chrono::nanoseconds attempt_timeout{0};  // each attempt
  std::chrono::nanoseconds jitter{0};
  std::optional<RetryPolicy> retry;
  MissedFirePolicy missed_fire = MissedFirePolicy::run_once;
  std::shared_ptr<Claimer> claimer;
  bool leader_gated = false;  // the scheduler has an elector and the entry's scope is the fleet
  bool every_replica = false;  // EntryScope::replica
  OverlapPolicy overlap = OverlapPolicy::allow;
  std::chrono::nanoseconds catch_up_reach{0};
  LedgerRetention ledger_retention;
  RecoverPolicy recover = RecoverPolicy::report;
  std::chrono::nanoseconds recover_within{0};
  int recover_max = 1;
  bool pause_on_failure = false;
};

/// Overlap bookkeeping of one entry: its automatic runs past the overlap
/// check and not yet ended (and manual runs), and whether a fire waits for
/// them (queue).
struct OverlapState {
  std::mutex mutex;  // guards active, waiting
  std::condition_variable_any cv;
  int active = 0;
  bool waiting = false;
};

/// The fleet state's cursor of one keyed entry (catch_up.cpp), when the
/// scheduler has a fleet state and the entry's catch-up reach is not 0.
struct CursorTracking {
  std::mutex mutex;  // guards busy
  std::condition_variable idle;
  /// Someone is catching the entry up (one at a time). A flag rather than
  /// a timed mutex: ThreadSanitizer does not see pthread_mutex_clocklock.
  bool busy = false;
  std::atomic<bool> caught_up{false};
  /// The entry's first instant on this replica's loop: catch-up covers the
  /// instants after the cursor and before it. Written under the
  /// scheduler's mutex_ by add(); read after.
  Instant first_loop_instant{};
  /// The newest instant this replica's loop skipped because no lease was
  /// held here (not-leader, election-error), in nanoseconds since the
  /// epoch: the catch-up reaches up to it too, so the instants of a start-up
  /// or handover without a leader are caught up by the next leader (the
  /// cursor says which the old leader took).
  std::atomic<std::chrono::nanoseconds::rep> unled_until{std::numeric_limits<std::chrono::nanoseconds::rep>::min()};
  /// The digest of the entry's schedule and how long its cursor must live
  /// (updated by update()).
  std::atomic<std::uint64_t> digest{0};
  std::atomic<std::chrono::nanoseconds::rep> keep_for{0};
};

/// An entry. identity, job and settings never change after add(); the rest
/// is guarded by Scheduler::Impl::mutex_, except the atomics. The fields
/// every fire reads come first (one cache line with the shared_ptr's
/// control block); `prev`, written by the workers, is kept apart from them.
struct Entry {
  Instant next = no_instant;
  std::uint64_t generation = 0;  // moved by EntryHeap::retire() (update/pause/resume/remove): its item goes stale
  std::shared_ptr<const EntrySettings> settings;
  std::atomic<bool> paused{false};  // written under mutex_; read by workers without it
  std::atomic<bool> removed{false};
  bool batchable = false;  // settings allow claim batches (Scheduler::Impl::batchable())
  SchedulePtr schedule;
  EntryIdentity identity;  // shared out as EntryRef by aliasing the entry's shared_ptr (no extra allocation)
  Job job;
  /// Set when settings->overlap is not allow (most entries need none).
  std::unique_ptr<OverlapState> overlap;
  /// Set when the entry keeps a cursor in the fleet state.
  std::unique_ptr<CursorTracking> cursor;
  /// The latest automatic fire that ran (ns since the epoch; min = none).
  /// Atomic so a finishing run never waits for the loop's lock.
  std::atomic<Instant::rep> prev{no_instant.time_since_epoch().count()};

  [[nodiscard]] static EntryRef ref(const std::shared_ptr<Entry>& entry) { return {entry, &entry->identity}; }
  static constexpr Instant no_instant = Instant::min();
};

}  // namespace fleetcron::detail
