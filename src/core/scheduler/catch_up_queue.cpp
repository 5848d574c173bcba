#include "core/scheduler/catch_up_queue.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

CatchUpQueue::CatchUpQueue(std::shared_ptr<Clock> clock, Attempt attempt, std::chrono::nanoseconds first_retry,
                           std::chrono::nanoseconds max_retry)
    : clock_(std::move(clock)), attempt_(std::move(attempt)), first_retry_(first_retry), max_retry_(max_retry) {
  FLEETCRON_ASSERT(first_retry_ > std::chrono::nanoseconds::zero() && max_retry_ >= first_retry_);
}

CatchUpQueue::~CatchUpQueue() {
  stop();
  join();
}

void CatchUpQueue::add(const std::shared_ptr<Entry>& entry) {
  {
    std::lock_guard guard(mutex_);
    if (stopping_) return;
    queue_.emplace(clock_->steady_now(), Pending{entry, first_retry_});
  }
  cv_.notify_one();
}

void CatchUpQueue::start() { thread_ = std::thread([this] { main(); }); }

void CatchUpQueue::stop() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void CatchUpQueue::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void CatchUpQueue::main() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto now = clock_->steady_now();
    const auto due = queue_.begin();
    if (due == queue_.end() || due->first > now) {
      const auto until = due == queue_.end() ? now + std::chrono::hours{1} : due->first;
      clock_->wait_until(cv_, lock, until);
      continue;
    }
    Pending pending = std::move(due->second);
    queue_.erase(due);
    const std::shared_ptr<Entry> entry = pending.entry.lock();
    if (!entry) continue;
    lock.unlock();
    const bool settled = attempt_(entry, pending.backoff);
    lock.lock();
    if (settled) continue;
    const auto retry_at = clock_->steady_now() + pending.backoff;
    pending.backoff = std::min(2 * pending.backoff, max_retry_);
    FLEETCRON_ASSERT(pending.backoff >= first_retry_ && pending.backoff <= max_retry_);
    queue_.emplace(retry_at, std::move(pending));
  }
}

}  // namespace fleetcron::detail
