// Internal: the runs in progress on this replica — one registration slot
// per worker, the timeout watchdog and its thread, the leadership terms
// reported lost, and how far a stop has reached them (a component of the
// scheduler with its own state and lock).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <thread>
#include <vector>

#include "core/scheduler/run_state.h"
#include "fleetcron/clock.h"

namespace fleetcron::detail {

class RunsInProgress {
 public:
  /// The leadership terms remembered as lost, newest last: only these are
  /// refused. Not "every term up to the highest": NATS terms are revisions,
  /// and a recreated bucket starts again at 1, below every term lost before.
  static constexpr std::size_t max_lost_terms = 64;

  /// One slot per worker.
  RunsInProgress(std::shared_ptr<Clock> clock, std::size_t workers);
  RunsInProgress(const RunsInProgress&) = delete;
  RunsInProgress& operator=(const RunsInProgress&) = delete;
  ~RunsInProgress();  // close()

  [[nodiscard]] std::span<const std::unique_ptr<WorkerSlot>> slots() const noexcept { return slots_; }

  /// Registers the run in its worker's slot; true if a stop began (the run
  /// must not start). Register first, then look at the flags: stop() and
  /// remove() set theirs before scanning the slots, so a run is either
  /// found by the scan or sees the flag — never neither.
  [[nodiscard]] bool register_run(Run& run, WorkerSlot& slot);
  /// Empties the slot and withdraws the run's timeout.
  void unregister_run(Run& run, WorkerSlot& slot);
  /// Whether runs still register and run (no stop began). Lock-free.
  [[nodiscard]] bool open() const noexcept { return state_.load() == State::open; }
  /// stop(): runs registering from now on are refused. Only forward: a
  /// second stop() does not take a closed watchdog back.
  void begin_stopping();

  /// The watchdog: requests the stop of a run (or of its current attempt)
  /// whose deadline passed, marking it timed out. Once, before close().
  void start_watchdog();
  /// The watchdog leaves, and is joined. Idempotent.
  void close();
  /// Registers one of the run's deadlines with the watchdog.
  void start_timeout(Run& run, Run::Deadline deadline, Clock::SteadyTime at);
  /// Withdraws it, if the watchdog has not taken it; for the attempt's
  /// deadline, also forgets the attempt's stop source.
  void end_timeout(Run& run, Run::Deadline deadline);
  /// The stop source the attempt's deadline stops (before start_timeout).
  void set_attempt_stop(Run& run, std::stop_source attempt);

  /// Requests the stop of every registered run `match` accepts (under its
  /// slot's lock); the stops are requested after the locks are released.
  void request_stop_where(const std::function<bool(const Run&)>& match, bool mark_timed_out);

  /// Remembers `term` as lost (at most max_lost_terms, oldest forgotten).
  void note_term_lost(std::uint64_t term);
  [[nodiscard]] bool term_lost(std::uint64_t term) const;

 private:
  /// How far a stop reached the runs (written under mutex_).
  enum class State {
    open,      // runs register and run
    stopping,  // runs registering from now on are refused
    closed,    // the watchdog leaves
  };
  void watchdog_main();
  [[nodiscard]] bool term_lost_locked(std::uint64_t term) const;

  std::shared_ptr<Clock> clock_;
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  mutable std::mutex mutex_;  // guards timeouts_, state_ (written), lost_terms_, Run::deadline_at and attempt_stop
  std::condition_variable watchdog_cv_;
  std::multimap<Clock::SteadyTime, Timeout> timeouts_;
  // Read without the lock by a registering run: a stop writes it, then
  // scans the slots, so a run either is found or sees the state.
  std::atomic<State> state_{State::open};
  std::deque<std::uint64_t> lost_terms_;
  std::mutex join_mutex_;  // close() from two stoppers joins once (a leaf but for the join)
  std::thread watchdog_thread_;
};

}  // namespace fleetcron::detail
