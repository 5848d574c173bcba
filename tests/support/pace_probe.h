// Test support: a bound on elapsed real time that holds on a busy host.
//
// A test against a real server that checks a latency promise ("the
// follower leads within one TTL", "a paused server fails the call within
// its timeout") cannot assume an idle host: beside four busy loops every
// thread wakes late. A PaceProbe measures that lateness over the same
// interval, in the same process, as the daemon's own lag probe does
// (docs/reliability.md, "A busy host"), and widens the bound by what it
// saw: an idle host keeps the documented bound; a busy one widens it by
// the measured lateness, times the wake-ups on the measured path.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace fleetcron::test {

class PaceProbe {
 public:
  using Duration = std::chrono::steady_clock::duration;

  PaceProbe() : started_(std::chrono::steady_clock::now()), thread_([this](std::stop_token stop) { run(stop); }) {}
  PaceProbe(const PaceProbe&) = delete;
  PaceProbe& operator=(const PaceProbe&) = delete;
  ~PaceProbe() { thread_.request_stop(); }

  /// Real time since the probe started.
  [[nodiscard]] Duration elapsed() const { return std::chrono::steady_clock::now() - started_; }

  /// The worst lateness of a short sleep seen so far.
  [[nodiscard]] Duration worst_lateness() const { return Duration{worst_.load()}; }

  /// `bound`, widened by the worst lateness seen times `wakeups` (the
  /// threads or processes that must each wake on the measured path).
  [[nodiscard]] Duration allow(Duration bound, int wakeups = 3) const { return bound + wakeups * worst_lateness(); }

  /// Whether the time since the probe started is within allow(bound, wakeups).
  [[nodiscard]] bool within(Duration bound, int wakeups = 3) const { return elapsed() <= allow(bound, wakeups); }

  /// For a failure's message: the time taken, the bound and the lateness.
  [[nodiscard]] std::string describe(Duration bound, int wakeups = 3) const {
    return "took " + milliseconds(elapsed()) + " ms; bound " + milliseconds(bound) + " ms, widened to " +
           milliseconds(allow(bound, wakeups)) + " ms by the host's worst lateness, " +
           milliseconds(worst_lateness()) + " ms, times " + std::to_string(wakeups);
  }

 private:
  static std::string milliseconds(Duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  }

  void run(const std::stop_token& stop) {
    constexpr auto nap = std::chrono::milliseconds{5};
    while (!stop.stop_requested()) {
      const auto before = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(nap);
      const auto late = std::chrono::steady_clock::now() - before - nap;
      Duration::rep seen = worst_.load();
      while (late.count() > seen && !worst_.compare_exchange_weak(seen, late.count())) {
      }
    }
  }

  std::chrono::steady_clock::time_point started_;
  std::atomic<Duration::rep> worst_{0};
  std::jthread thread_;  // last: started after the members it writes
};

}  // namespace fleetcron::test
