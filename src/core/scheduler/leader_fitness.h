// Internal: whether this replica is fit to lead — its loop passes, and it
// is not stepping down after its leader-gated claims kept failing (a
// component of the scheduler with its own state; lock-free but for one leaf).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "fleetcron/clock.h"

namespace fleetcron::detail {

class LeaderFitness {
 public:
  /// The loop re-reads the wall clock at least this often, so a wall-clock
  /// step is noticed within a second even when nothing is due.
  static constexpr std::chrono::nanoseconds max_loop_sleep = std::chrono::seconds{1};
  /// The loop is alive while it passes at least this often (three sleeps).
  static constexpr std::chrono::nanoseconds liveness_bound = 3 * max_loop_sleep;
  /// Leader-gated claims failing (errors, clock-skew refusals) this long
  /// in a row step the replica down ...
  static constexpr std::chrono::nanoseconds claim_failure_step_down = std::chrono::seconds{5};
  /// ... out of the election for this long.
  static constexpr std::chrono::nanoseconds step_down_hold = std::chrono::seconds{30};

  explicit LeaderFitness(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  /// The loop passed (at least every max_loop_sleep while it runs).
  void note_loop_pass() { loop_passes_.fetch_add(1, std::memory_order_relaxed); }
  /// False once the loop has not passed for liveness_bound since a look
  /// found it without a new pass. Two looks, not one timestamp: after a
  /// pause (SIGSTOP) or a jump of a virtual clock every thread resumes at
  /// once, and the elector's thread may look before the loop has run.
  [[nodiscard]] bool loop_alive() const;
  /// Whether the replica is out of the election after failing claims.
  [[nodiscard]] bool stepped_down() const;
  /// Tracks the answer to a leader-gated claim (`failed`: an error or a
  /// clock-skew refusal). Returns how long they failed when this one steps
  /// the replica down (once per window, whichever worker sees it first).
  std::optional<std::chrono::nanoseconds> note_claim(bool failed);

 private:
  const std::shared_ptr<Clock> clock_;
  std::atomic<std::uint64_t> loop_passes_{0};
  mutable std::mutex liveness_mutex_;  // a leaf; guards seen_passes_, stale_since_
  mutable std::uint64_t seen_passes_ = 0;
  mutable std::optional<Clock::SteadyTime> stale_since_;
  std::atomic<Clock::SteadyTime::rep> failing_since_{0};  // 0: the latest answer was a real one
  std::atomic<Clock::SteadyTime::rep> last_failure_{0};
  std::atomic<Clock::SteadyTime::rep> stepped_down_until_{0};
};

}  // namespace fleetcron::detail
