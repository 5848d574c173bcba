// Internal: the scheduler's random delays — a fire's jitter and a retry's
// backoff with its spread — from one seeded generator (a component with
// its own lock, a leaf).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>

#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

class RandomDelays {
 public:
  /// `seed` 0: a random seed; otherwise the same seed, the same delays.
  explicit RandomDelays(std::uint64_t seed);

  /// Uniform in [0, bound); 0 when `bound` is not positive.
  [[nodiscard]] std::chrono::nanoseconds below(std::chrono::nanoseconds bound);
  /// The wait before the attempt after `failed_attempts` (at least 1):
  /// initial_delay × multiplier^(failed_attempts − 1), at most max_delay,
  /// then spread by ± jitter_fraction of itself; never negative.
  [[nodiscard]] std::chrono::nanoseconds retry_delay(const RetryPolicy& retry, int failed_attempts);

 private:
  std::mutex mutex_;  // guards random_
  std::mt19937_64 random_;
};

}  // namespace fleetcron::detail
