// Internal: at most N lines of one kind per window, so that what happens
// to every job at once (a start with 100,000 new jobs) is not 100,000
// lines at info level. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace fleetcron::detail {

class LogQuota {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  enum class Kind { logged, last, quiet };
  struct Take {
    Kind kind;
    std::size_t left_out = 0;  ///< lines left out of the window before (on a new window's first)
  };

  LogQuota(std::size_t lines_per_window, std::chrono::nanoseconds window) noexcept
      : lines_per_window_(lines_per_window), window_(window) {}

  /// `logged` while the window has room, `last` for the line that fills
  /// it (it should say the rest are left out), `quiet` after (not logged).
  /// A new window's first line hears how many the one before left out.
  [[nodiscard]] Take take(SteadyTime now) {
    std::lock_guard guard(mutex_);
    std::size_t left_out = 0;
    if (now - window_start_ >= window_ || taken_ == 0) {
      left_out = taken_ > lines_per_window_ ? taken_ - lines_per_window_ : 0;
      window_start_ = now;
      taken_ = 0;
    }
    ++taken_;
    if (taken_ < lines_per_window_) return {Kind::logged, left_out};
    return {taken_ == lines_per_window_ ? Kind::last : Kind::quiet, left_out};
  }

 private:
  const std::size_t lines_per_window_;
  const std::chrono::nanoseconds window_;
  std::mutex mutex_;
  SteadyTime window_start_{};
  std::size_t taken_ = 0;
};

}  // namespace fleetcron::detail
