// The runs in progress: registration, the timeout watchdog, stop requests
// and the leadership terms reported lost.
#include "core/scheduler/runs_in_progress.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

RunsInProgress::RunsInProgress(std::shared_ptr<Clock> clock, std::size_t workers) : clock_(std::move(clock)) {
  slots_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) slots_.push_back(std::make_unique<WorkerSlot>());
}

RunsInProgress::~RunsInProgress() { close(); }

bool RunsInProgress::register_run(Run& run, WorkerSlot& slot) {
  {
    std::lock_guard guard(slot.mutex);
    FLEETCRON_ASSERT(slot.run == nullptr);
    slot.run = &run;
  }
  return !open();
}

void RunsInProgress::unregister_run(Run& run, WorkerSlot& slot) {
  {
    std::lock_guard guard(slot.mutex);
    FLEETCRON_ASSERT(slot.run == &run);
    slot.run = nullptr;
  }
  end_timeout(run, Run::Deadline::run);
}

void RunsInProgress::begin_stopping() {
  std::lock_guard guard(mutex_);
  if (state_ == State::open) state_ = State::stopping;
}

void RunsInProgress::start_watchdog() {
  FLEETCRON_ASSERT(!watchdog_thread_.joinable());
  watchdog_thread_ = std::thread([this] { watchdog_main(); });
}

void RunsInProgress::close() {
  std::lock_guard join_guard(join_mutex_);
  {
    std::lock_guard guard(mutex_);
    state_ = State::closed;
  }
  watchdog_cv_.notify_all();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
}

void RunsInProgress::start_timeout(Run& run, Run::Deadline deadline, Clock::SteadyTime at) {
  const auto index = static_cast<std::size_t>(deadline);
  FLEETCRON_ASSERT(!run.registered[index]);
  {
    std::lock_guard guard(mutex_);
    run.deadline_at[index] = at;
    timeouts_.emplace(at, Timeout{&run, deadline});
  }
  run.registered[index] = true;
  watchdog_cv_.notify_one();
}

void RunsInProgress::end_timeout(Run& run, Run::Deadline deadline) {
  const auto index = static_cast<std::size_t>(deadline);
  if (!run.registered[index]) return;  // the common case: nothing to search
  run.registered[index] = false;
  std::lock_guard guard(mutex_);
  if (deadline == Run::Deadline::attempt) run.attempt_stop = std::stop_source{std::nostopstate};
  if (!run.deadline_at[index]) return;  // the watchdog took it (the timeout fired)
  auto [first, last] = timeouts_.equal_range(*run.deadline_at[index]);
  for (auto it = first; it != last; ++it) {
    if (it->second.run == &run && it->second.deadline == deadline) {
      timeouts_.erase(it);
      break;
    }
  }
  run.deadline_at[index].reset();
}

void RunsInProgress::set_attempt_stop(Run& run, std::stop_source attempt) {
  std::lock_guard guard(mutex_);
  run.attempt_stop = std::move(attempt);
}

void RunsInProgress::watchdog_main() {
  std::unique_lock lock(mutex_);
  while (state_ != State::closed) {
    const auto now = clock_->steady_now();
    if (!timeouts_.empty() && timeouts_.begin()->first <= now) {
      // The run is alive while its item is here: end_timeout() takes it
      // out under this lock.
      const Timeout due = timeouts_.begin()->second;
      timeouts_.erase(timeouts_.begin());
      Run& run = *due.run;
      run.deadline_at[static_cast<std::size_t>(due.deadline)].reset();
      const bool whole_run = due.deadline == Run::Deadline::run;
      (whole_run ? run.timed_out : run.attempt_timed_out).store(true);
      std::stop_source stop = whole_run ? run.stop : run.attempt_stop;  // the run may end once we unlock
      lock.unlock();
      stop.request_stop();
      lock.lock();
      continue;
    }
    const auto deadline = timeouts_.empty() ? now + std::chrono::seconds{1} : timeouts_.begin()->first;
    clock_->wait_until(watchdog_cv_, lock, deadline);
  }
}

void RunsInProgress::request_stop_where(const std::function<bool(const Run&)>& match, bool mark_timed_out) {
  std::vector<std::stop_source> matched;
  for (const auto& slot : slots_) {
    std::lock_guard guard(slot->mutex);
    if (slot->run == nullptr || !match(*slot->run)) continue;
    if (mark_timed_out) slot->run->timed_out.store(true);
    matched.push_back(slot->run->stop);
  }
  // Outside the lock: request_stop() runs the jobs' stop callbacks.
  for (auto& stop : matched) stop.request_stop();
}

void RunsInProgress::note_term_lost(std::uint64_t term) {
  std::lock_guard guard(mutex_);
  if (term_lost_locked(term)) return;
  if (lost_terms_.size() == max_lost_terms) lost_terms_.pop_front();
  lost_terms_.push_back(term);
}

bool RunsInProgress::term_lost(std::uint64_t term) const {
  std::lock_guard guard(mutex_);
  return term_lost_locked(term);
}

bool RunsInProgress::term_lost_locked(std::uint64_t term) const {
  return std::find(lost_terms_.begin(), lost_terms_.end(), term) != lost_terms_.end();
}

}  // namespace fleetcron::detail
