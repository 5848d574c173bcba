// How late the host wakes this daemon's threads: a probe thread sleeps a
// fixed interval on the steady clock and measures how much longer it slept.
// Every thread of the daemon (the scheduler's loop, the elector's renewal,
// the workers) waits the same way, so this is the lateness each of them
// sees: fires start late by about as much, and the elector renews its
// lease late by as much (docs/reliability.md, "A busy host").
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <memory>
#include <thread>

#include "fleetcron/clock.h"

namespace fleetcron::daemon {

class SchedulingLag {
 public:
  /// One window's worst lateness, reported when it reached report_from.
  using Report = std::function<void(std::chrono::nanoseconds worst, std::chrono::nanoseconds window)>;
  /// Each probe's lateness, for a histogram.
  using Observe = std::function<void(std::chrono::nanoseconds lateness)>;

  static constexpr std::chrono::milliseconds probe_interval{100};
  static constexpr std::chrono::seconds window{10};
  /// A window whose worst lateness stays below this is not reported.
  static constexpr std::chrono::milliseconds report_from{100};

  /// `clock`: the system clock in the daemon; a virtual one in tests.
  SchedulingLag(Observe observe, Report report, std::shared_ptr<Clock> clock = system_clock());
  ~SchedulingLag();
  SchedulingLag(const SchedulingLag&) = delete;
  SchedulingLag& operator=(const SchedulingLag&) = delete;

 private:
  void probe_main();

  Observe observe_;
  Report report_;
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fleetcron::daemon
