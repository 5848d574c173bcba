// fleetcron — clocks: the real one, and a virtual one for tests and simulations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// Where the scheduler reads time and how it waits. Wall time (now()) gives
/// fire instants and lateness; every wait is on the steady timeline, so
/// wall-clock steps never stretch or shorten a sleep.
class FLEETCRON_API Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  /// Wall-clock time (UTC).
  [[nodiscard]] virtual Instant now() const noexcept = 0;
  /// Monotonic time.
  [[nodiscard]] virtual SteadyTime steady_now() const noexcept = 0;

  /// Waits on `cv`, whose mutex `lock` holds, until notified or until
  /// steady_now() reaches `deadline`; may wake spuriously, so callers loop
  /// on their condition. A virtual clock wakes the waiter when advanced past
  /// `deadline` (it locks the waiter's mutex before notifying, so no wake-up
  /// is lost).
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) = 0;

 protected:
  Clock() = default;
};

/// The process's real clocks (std::chrono::system_clock and steady_clock).
[[nodiscard]] FLEETCRON_API std::shared_ptr<Clock> system_clock();

/// Sleeps `duration` on `clock`'s steady timeline, ending early when `stop`
/// is requested: false then, true if the whole duration passed. For jobs
/// that wait, and for the scheduler's jitter and retry delays.
FLEETCRON_API bool sleep_for(Clock& clock, std::chrono::nanoseconds duration, std::stop_token stop);

/// A clock that moves only when told to. advance() moves wall and steady
/// time together and wakes every waiter whose deadline has passed;
/// jump_wall() moves only the wall clock (an NTP step) and wakes everyone.
class FLEETCRON_API VirtualClock final : public Clock {
 public:
  explicit VirtualClock(Instant start);
  ~VirtualClock() override;
  VirtualClock(const VirtualClock&) = delete;
  VirtualClock& operator=(const VirtualClock&) = delete;

  [[nodiscard]] Instant now() const noexcept override;
  [[nodiscard]] SteadyTime steady_now() const noexcept override;
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override;

  /// Moves both timelines forward by `step` (must not be negative).
  void advance(std::chrono::nanoseconds step);
  /// Steps the wall clock by `step` (either sign); steady time stays.
  void jump_wall(std::chrono::nanoseconds step);
  /// How many callers are blocked in wait_until() right now.
  [[nodiscard]] std::size_t waiter_count() const;
  /// How many of them are past their deadline but not yet awake: tests wait
  /// for this to reach 0 before looking, so every woken thread has acted.
  [[nodiscard]] std::size_t due_waiter_count() const;
  /// The earliest deadline among blocked callers (nullopt if none): a
  /// simulation advances straight to it instead of stepping blindly.
  [[nodiscard]] std::optional<SteadyTime> next_deadline() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fleetcron
