#include "core/scheduler/leader_fitness.h"

namespace fleetcron::detail {

bool LeaderFitness::loop_alive() const {
  const std::uint64_t passes = loop_passes_.load(std::memory_order_relaxed);
  const auto now = clock_->steady_now();
  std::lock_guard guard(liveness_mutex_);
  if (passes != seen_passes_) {
    seen_passes_ = passes;
    stale_since_.reset();
    return true;
  }
  if (!stale_since_) stale_since_ = now;  // no pass since the last look: suspect, from now
  return now - *stale_since_ < liveness_bound;
}

bool LeaderFitness::stepped_down() const {
  return clock_->steady_now().time_since_epoch().count() < stepped_down_until_.load(std::memory_order_relaxed);
}

std::optional<std::chrono::nanoseconds> LeaderFitness::note_claim(bool failed) {
  if (!failed) {
    failing_since_.store(0, std::memory_order_relaxed);
    return std::nullopt;
  }
  const auto now = clock_->steady_now().time_since_epoch().count();
  // While stepped down, failures in flight from before do not count: the
  // next window starts with the first failure after the hold.
  if (now < stepped_down_until_.load(std::memory_order_relaxed)) return std::nullopt;
  // Failures must be continuous: one older than the bound (a transient
  // error an hour ago) starts a new window instead of extending the old one.
  const auto previous = last_failure_.exchange(now, std::memory_order_relaxed);
  if (previous != 0 && now - previous > claim_failure_step_down.count()) {
    failing_since_.store(now, std::memory_order_relaxed);
    return std::nullopt;
  }
  Clock::SteadyTime::rep since = 0;
  if (failing_since_.compare_exchange_strong(since, now, std::memory_order_relaxed)) return std::nullopt;  // the first
  const std::chrono::nanoseconds failing_for{now - since};
  if (failing_for < claim_failure_step_down || now < stepped_down_until_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  if (!failing_since_.compare_exchange_strong(since, 0, std::memory_order_relaxed)) return std::nullopt;  // another did
  stepped_down_until_.store(now + step_down_hold.count(), std::memory_order_relaxed);
  return failing_for;
}

}  // namespace fleetcron::detail
