// The scheduler's random delays: jitter and retry backoff.
#include "core/scheduler/random_delays.h"

#include <algorithm>
#include <cmath>

#include "core/support/assert.h"

namespace fleetcron::detail {

namespace {
std::uint64_t initial_seed(std::uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}
}  // namespace

RandomDelays::RandomDelays(std::uint64_t seed) : random_(initial_seed(seed)) {}

std::chrono::nanoseconds RandomDelays::below(std::chrono::nanoseconds bound) {
  if (bound <= std::chrono::nanoseconds::zero()) return std::chrono::nanoseconds::zero();
  std::lock_guard guard(mutex_);
  std::uniform_int_distribution<std::int64_t> pick(0, bound.count() - 1);
  return std::chrono::nanoseconds{pick(random_)};
}

std::chrono::nanoseconds RandomDelays::retry_delay(const RetryPolicy& retry, int failed_attempts) {
  FLEETCRON_ASSERT(failed_attempts >= 1);
  double delay = static_cast<double>(retry.initial_delay.count()) * std::pow(retry.multiplier, failed_attempts - 1);
  delay = std::min(delay, static_cast<double>(retry.max_delay.count()));
  if (retry.jitter_fraction > 0) {
    std::lock_guard guard(mutex_);
    std::uniform_real_distribution<double> spread(-retry.jitter_fraction, retry.jitter_fraction);
    delay += delay * spread(random_);
  }
  return std::chrono::nanoseconds{static_cast<std::int64_t>(std::max(0.0, delay))};
}

}  // namespace fleetcron::detail
