#include "daemon/scheduling_lag.h"

namespace fleetcron::daemon {

SchedulingLag::SchedulingLag(Observe observe, Report report)
    : observe_(std::move(observe)), report_(std::move(report)), thread_([this] { probe_main(); }) {}

SchedulingLag::~SchedulingLag() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void SchedulingLag::probe_main() {
  using steady = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  auto window_started = steady::now();
  std::chrono::nanoseconds worst{0};
  while (!stopping_) {
    const auto due = steady::now() + probe_interval;
    if (stop_cv_.wait_until(lock, due, [this] { return stopping_; })) break;
    const auto woke = steady::now();
    const auto lateness = std::max(std::chrono::nanoseconds{0}, std::chrono::nanoseconds{woke - due});
    worst = std::max(worst, lateness);
    lock.unlock();
    observe_(lateness);
    if (woke - window_started >= window) {
      if (worst >= report_from) report_(worst, woke - window_started);
      window_started = woke;
      worst = std::chrono::nanoseconds{0};
    }
    lock.lock();
  }
}

}  // namespace fleetcron::daemon
