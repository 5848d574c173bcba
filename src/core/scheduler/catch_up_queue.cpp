#include "core/scheduler/catch_up_queue.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

CatchUpQueue::CatchUpQueue(std::shared_ptr<Clock> clock, Attempt attempt, std::chrono::nanoseconds first_retry,
                           std::chrono::nanoseconds max_retry, Prefetch prefetch)
    : clock_(std::move(clock)),
      attempt_(std::move(attempt)),
      prefetch_(std::move(prefetch)),
      first_retry_(first_retry),
      max_retry_(max_retry) {
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

std::vector<std::pair<CatchUpQueue::Pending, std::shared_ptr<Entry>>> CatchUpQueue::take_due(Clock::SteadyTime now) {
  std::vector<std::pair<Pending, std::shared_ptr<Entry>>> due;
  while (due.size() < max_batch && !queue_.empty() && queue_.begin()->first <= now) {
    Pending pending = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    if (auto entry = pending.entry.lock()) due.emplace_back(std::move(pending), std::move(entry));
  }
  return due;
}

void CatchUpQueue::main() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto now = clock_->steady_now();
    if (queue_.empty() || queue_.begin()->first > now) {
      const auto until = queue_.empty() ? now + std::chrono::hours{1} : queue_.begin()->first;
      clock_->wait_until(cv_, lock, until);
      continue;
    }
    auto due = take_due(now);
    lock.unlock();
    if (prefetch_ && due.size() > 1) {
      std::vector<std::shared_ptr<Entry>> entries;
      entries.reserve(due.size());
      for (const auto& [pending, entry] : due) entries.push_back(entry);
      prefetch_(entries);
    }
    std::vector<Pending> unsettled;
    for (auto& [pending, entry] : due) {
      {
        std::lock_guard guard(mutex_);
        if (stopping_) break;  // no attempt starts once stopping
      }
      if (!attempt_(entry, pending.backoff)) unsettled.push_back(std::move(pending));
    }
    lock.lock();
    for (auto& pending : unsettled) {
      const auto retry_at = clock_->steady_now() + pending.backoff;
      pending.backoff = std::min(2 * pending.backoff, max_retry_);
      FLEETCRON_ASSERT(pending.backoff >= first_retry_ && pending.backoff <= max_retry_);
      queue_.emplace(retry_at, std::move(pending));
    }
  }
}

}  // namespace fleetcron::detail
