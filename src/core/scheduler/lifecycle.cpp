// The scheduler's lifecycle: start() launches the loop, the workers and the
// watchdog; stop() and drain() end them (with the elector's resignation),
// and one thread joins them.
#include <fmt/format.h>

#include <exception>

#include "core/scheduler/scheduler_impl.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;
using detail::Run;

bool Scheduler::Impl::fit_to_lead() const {
  if (!fitness_.loop_alive() || fitness_.stepped_down()) return false;
  // A replica refused by the registry would hold the lease and run nothing.
  const auto verdict = registry_verdict();
  return !verdict || verdict->empty();
}

bool Scheduler::Impl::controls_on() const { return options_.fleet.state && options_.fleet.controls; }

void Scheduler::Impl::start() {
  {
    std::lock_guard guard(mutex_);
    if (state_ != State::created) return start_locked();
  }
  // Before the loop runs: the replica's settings are checked against the
  // fleet's (its coordinated fires wait for the verdict), a job the fleet
  // paused stays paused across a restart, and triggers waiting are taken
  // (queued for the workers).
  if (membership_) {
    membership_->start();
    membership_->announce();
    membership_->catalogue_if_due();
  }
  if (controls_) controls_->poll();
  std::lock_guard guard(mutex_);
  start_locked();
}

void Scheduler::Impl::start_locked() {
  if (state_ == State::running) return;
  if (state_ != State::created) throw SchedulerError(SchedulerError::Code::stopped, "start: a stopped scheduler cannot restart");
  if (options_.elector) {
    leadership_guard_->impl = this;
    options_.elector->on_leadership_lost([guard = leadership_guard_](std::uint64_t term) {
      std::lock_guard hold(guard->mutex);  // detach_elector() waits for this
      if (guard->impl != nullptr) guard->impl->on_leadership_lost(term);
    });
    {
      std::lock_guard hold(leadership_guard_->liveness_mutex);
      leadership_guard_->liveness_impl = this;
    }
    options_.elector->set_liveness([guard = leadership_guard_] {
      std::lock_guard hold(guard->liveness_mutex);
      return guard->liveness_impl != nullptr && guard->liveness_impl->fit_to_lead();
    });
  }
  state_ = State::running;
  workers_.reserve(options_.limits.max_concurrent);
  for (const auto& slot : runs_.slots()) workers_.emplace_back([this, worker = slot.get()] { worker_main(*worker); });
  runs_.start_watchdog();
  if (catch_up_queue_) {
    for (const auto& [id, entry] : entries_) queue_catch_up(entry);
    catch_up_queue_->start();
  }
  if (upkeep_) upkeep_->start();
  loop_thread_ = std::thread([this] { loop_main(); });
}

bool Scheduler::Impl::stop(Clock::SteadyTime deadline, bool drain_first) {
  {
    std::unique_lock guard(mutex_);
    if (state_ == State::created) {
      state_ = State::stopped;
      guard.unlock();  // an observer may call back into us while we flush
      events_.flush_and_stop();
      return true;
    }
    if (state_ == State::running) state_ = State::stopping;
  }
  loop_cv_.notify_all();
  if (catch_up_queue_) catch_up_queue_->stop();
  if (upkeep_) upkeep_->stop_polls();  // no new polls, and no trigger taken by a poll still going
  {
    std::lock_guard guard(join_mutex_);
    if (loop_thread_.joinable() && loop_thread_.get_id() != std::this_thread::get_id()) loop_thread_.join();
  }
  // No new fires from here on: free the lease now, so another replica
  // leads within its next check instead of after the runs (and a drain's
  // grace) end. Running leader-gated jobs keep their fence.
  resign_once();

  const bool on_worker = detail::on_worker_of(this);
  const std::size_t self = on_worker ? 1 : 0;
  run_queue_.close();  // no new fires; workers leave once the queue is empty
  if (drain_first) (void)run_queue_.wait_finished(self, *clock_, deadline);
  // Stop: cancel what is still queued, then ask running jobs to stop.
  std::vector<Fire> cancelled = run_queue_.take_all();
  for (auto& fire : cancelled) {
    drop_chain(fire, true);
    report_cancel(fire, "scheduler stopped", CancelReason::scheduler_stopped);
    if (fire.outcome) fire.outcome->set(RunOutcome{RunStatus::cancelled, 0, "scheduler stopped"});
  }
  runs_.begin_stopping();  // runs registering from now on stop at once
  runs_.request_stop_where([](const Run&) { return true; }, false);
  const bool all_finished = run_queue_.wait_finished(self, *clock_, deadline);
  if (!all_finished || on_worker) return all_finished;
  join_threads_once();
  return true;
}

void Scheduler::Impl::join_threads_once() {
  std::lock_guard join_guard(join_mutex_);  // a second stopper waits here, then finds joined_
  if (joined_) return;
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  runs_.close();
  if (loop_thread_.joinable()) loop_thread_.join();
  if (catch_up_queue_) catch_up_queue_->join();
  // The runs ended: the registry no longer needs this replica's record
  // (it listed them while they ran), and the fleet need not wait for it to expire.
  if (upkeep_) upkeep_->stop();
  if (membership_) membership_->withdraw_once();
  resign_once();
  if (ledger_) ledger_->stop();  // after the last fire's record
  events_.flush_and_stop();
  joined_ = true;
  std::lock_guard guard(mutex_);
  state_ = State::stopped;
}

void Scheduler::Impl::resign_once() {
  if (!options_.elector || resigned_.exchange(true)) return;
  detach_elector();
  try {
    options_.elector->resign();  // hand over now rather than after the lease TTL
  } catch (...) {
    log(LogLevel::warning, "elector resign failed: " + detail::describe_exception(std::current_exception()));
  }
}

void Scheduler::Impl::detach_elector() {
  {
    std::lock_guard hold(leadership_guard_->liveness_mutex);  // waits for a liveness check under way
    leadership_guard_->liveness_impl = nullptr;
  }
  {
    std::lock_guard hold(leadership_guard_->mutex);  // waits for a callback under way
    leadership_guard_->impl = nullptr;
  }
  if (!options_.elector) return;
  try {
    options_.elector->on_leadership_lost({});
  } catch (...) {
    log(LogLevel::warning, "elector rejected clearing its callback: " + detail::describe_exception(std::current_exception()));
  }
}

}  // namespace fleetcron
