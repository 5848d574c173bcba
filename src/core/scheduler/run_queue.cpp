#include "core/scheduler/run_queue.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

RunQueue::RunQueue(std::size_t workers, std::size_t max_queued, BatchRule rule)
    : workers_(workers), max_queued_(max_queued), rule_(std::move(rule)) {}

RunQueue::Pushed RunQueue::push(std::vector<Fire>& fires) {
  Pushed pushed;
  std::vector<Fire> refused;
  {
    std::lock_guard guard(mutex_);
    pushed.closed = closed_;
    for (auto& fire : fires) {
      if (closed_ || queue_.size() + held_ >= max_queued_) {  // held: out for a decision, coming back
        refused.push_back(std::move(fire));
      } else {
        queue_.push_back(std::move(fire));
        ++pushed.added;
      }
    }
    pushed.queued = queue_.size() + held_;
    pushed.running = running_;
  }
  fires = std::move(refused);
  // One worker per new fire, not all of them: a woken worker takes a claim
  // batch, and waking every idle worker for each push is a herd.
  for (std::size_t i = 0; i < std::min(pushed.added, workers_); ++i) work_cv_.notify_one();
  return pushed;
}

bool RunQueue::can_take_locked() const {
  if (queue_.empty()) return false;
  // A granted fire brings the worker reserved for it; any other needs one
  // that no claim batch has reserved.
  return queue_.front().reserved || committed_ < workers_;
}

bool RunQueue::take(Fire& fire, std::vector<Fire>& batch, std::vector<Fire>& looked) {
  std::unique_lock lock(mutex_);
  // A worker holding a claim batch will put fires back: wait for them.
  work_cv_.wait(lock, [this] { return (closed_ && held_ == 0 && queue_.empty()) || can_take_locked(); });
  if (queue_.empty()) return false;  // closed, and nothing left (drained, or cleared by take_all())
  fire = queue_.pop_front();
  FLEETCRON_ASSERT(!fire.reserved || fire.state == FireState::granted);  // only a claim batch reserves
  ++running_;
  if (!fire.reserved) ++committed_;  // this worker; a granted fire's reservation passes to it
  fire.reserved = false;
  FLEETCRON_ASSERT(running_ <= workers_ && committed_ <= workers_);
  if (rule_.starts && rule_.starts(fire)) take_batch_locked(fire, batch, looked);
  held_ += batch.size() + looked.size();
  return true;
}

void RunQueue::take_batch_locked(const Fire& first, std::vector<Fire>& batch, std::vector<Fire>& looked) {
  // Only the front run of the queue: fires due at one instant are queued
  // together, and taking from the middle would cost a scan per worker.
  // Only as many as there are workers neither busy nor reserved by another
  // batch, and each taken fire reserves one.
  const std::size_t free_workers = workers_ - std::min(workers_, committed_);
  const std::size_t limit = std::min(rule_.limit - 1, free_workers);
  while (!queue_.empty() && batch.size() < limit && rule_.joins(first, queue_.front())) {
    batch.push_back(queue_.pop_front());
  }
  committed_ += batch.size();
  FLEETCRON_ASSERT(committed_ <= workers_);  // every fire the batch claims has a worker to start on
  if (batch.size() < free_workers || !rule_.looks || !rule_.looks(first)) return;  // not cut by the workers, or no look
  // Each fire at most max_looks times: those looked at come back at the
  // front, and one looked at as often stops the next look.
  while (!queue_.empty() && looked.size() < rule_.limit && queue_.front().looks < Fire::max_looks &&
         rule_.joins(first, queue_.front())) {
    looked.push_back(queue_.pop_front());
    ++looked.back().looks;
  }
}

void RunQueue::done(bool ran) {
  {
    std::lock_guard guard(mutex_);
    FLEETCRON_ASSERT(running_ > 0 && (!ran || committed_ > 0));
    if (ran) --committed_;
    --running_;
    if (!queue_.empty()) work_cv_.notify_one();  // a fire may have waited for a free worker
  }
  idle_cv_.notify_all();
}

QueueDepthEvent RunQueue::depth() const {
  std::lock_guard guard(mutex_);
  return QueueDepthEvent{queue_.size() + held_, running_};
}

void RunQueue::release(std::size_t count) {
  if (count == 0) return;
  {
    std::lock_guard guard(mutex_);
    FLEETCRON_ASSERT(committed_ >= count);
    committed_ -= count;
  }
  work_cv_.notify_all();  // the freed workers may take other fires
}

void RunQueue::put_back(std::vector<Fire>& granted, std::vector<Fire>& unclaimed, std::size_t taken, bool runs) {
  for (auto& fire : granted) fire.reserved = true;
  {
    std::lock_guard guard(mutex_);
    FLEETCRON_ASSERT(held_ >= taken && (runs || committed_ > 0));
    held_ -= taken;  // back in the queue, or dropped (their reservations are released)
    if (!runs) --committed_;
    queue_.push_front(unclaimed);
    queue_.push_front(granted);
  }
  work_cv_.notify_all();
  granted.clear();
  unclaimed.clear();
}

void RunQueue::close() {
  {
    std::lock_guard guard(mutex_);
    closed_ = true;
  }
  work_cv_.notify_all();
}

bool RunQueue::finished_locked(std::size_t self) const { return queue_.empty() && held_ == 0 && running_ <= self; }

bool RunQueue::wait_finished(std::size_t self, Clock& clock, Clock::SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  while (!finished_locked(self) && clock.steady_now() < deadline) clock.wait_until(idle_cv_, lock, deadline);
  return finished_locked(self);
}

std::vector<Fire> RunQueue::take_all() {
  std::vector<Fire> taken;
  {
    std::lock_guard guard(mutex_);
    taken.reserve(queue_.size());
    while (!queue_.empty()) {
      taken.push_back(queue_.pop_front());
      if (taken.back().reserved) --committed_;
    }
  }
  work_cv_.notify_all();  // workers waiting on a closed queue leave
  return taken;
}

}  // namespace fleetcron::detail
