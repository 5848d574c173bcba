#include "daemon/observe/scheduling_lag.h"

namespace fleetcron::daemon {

SchedulingLag::SchedulingLag(Observe observe, Report report, std::shared_ptr<Clock> clock)
    : observe_(std::move(observe)),
      report_(std::move(report)),
      clock_(std::move(clock)),
      thread_([this] { probe_main(); }) {}

SchedulingLag::~SchedulingLag() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void SchedulingLag::probe_main() {
  std::unique_lock lock(mutex_);
  auto window_started = clock_->steady_now();
  std::chrono::nanoseconds worst{0};
  while (!stopping_) {
    const auto due = clock_->steady_now() + probe_interval;
    while (!stopping_ && clock_->steady_now() < due) clock_->wait_until(stop_cv_, lock, due);
    if (stopping_) break;
    const auto woke = clock_->steady_now();
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
