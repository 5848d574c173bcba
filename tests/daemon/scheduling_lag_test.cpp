// The scheduling-lag probe on a virtual clock: a wake on time is no lag,
// a late one is measured, and a window is reported only when its worst
// wake reached report_from.
#include "daemon/observe/scheduling_lag.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "support/eventually.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

struct Probed {
  std::mutex mutex;
  std::vector<std::chrono::nanoseconds> observed;
  std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> reports;  // worst, window
};

class SchedulingLagTest : public ::testing::Test {
 protected:
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(Instant{});
  Probed probed;

  std::unique_ptr<SchedulingLag> start() {
    auto lag = std::make_unique<SchedulingLag>(
        [this](std::chrono::nanoseconds lateness) {
          std::lock_guard guard(probed.mutex);
          probed.observed.push_back(lateness);
        },
        [this](std::chrono::nanoseconds worst, std::chrono::nanoseconds window) {
          std::lock_guard guard(probed.mutex);
          probed.reports.emplace_back(worst, window);
        },
        clock);
    settle();
    return lag;
  }
  /// Waits until the probe sleeps again, nothing due.
  void settle() {
    ASSERT_TRUE(test::eventually([&] { return clock->waiter_count() == 1 && clock->due_waiter_count() == 0; }));
  }
  /// Moves the clock past the probe's next wake and waits for that wake's
  /// measurement (and for the probe to sleep again).
  void step(std::chrono::nanoseconds by) {
    const std::size_t before = observed_count();
    clock->advance(by);
    ASSERT_TRUE(test::eventually([&] { return observed_count() == before + 1; }));
    settle();
  }
  std::size_t observed_count() {
    std::lock_guard guard(probed.mutex);
    return probed.observed.size();
  }
};

TEST_F(SchedulingLagTest, WakesOnTimeAreNoLagAndNotReported) {
  auto lag = start();
  for (int i = 0; i < 120; ++i) step(SchedulingLag::probe_interval);  // 12 s: one window and more
  lag.reset();
  std::lock_guard guard(probed.mutex);
  EXPECT_EQ(probed.observed.size(), 120u);
  for (const auto lateness : probed.observed) EXPECT_EQ(lateness, 0ns);
  EXPECT_TRUE(probed.reports.empty());
}

TEST_F(SchedulingLagTest, ALateWakeIsMeasuredAndItsWindowReported) {
  auto lag = start();
  step(SchedulingLag::probe_interval + 600ms);  // the host woke the probe 600 ms late
  for (int i = 0; i < 100; ++i) step(SchedulingLag::probe_interval);
  lag.reset();
  std::lock_guard guard(probed.mutex);
  ASSERT_FALSE(probed.observed.empty());
  EXPECT_EQ(probed.observed.front(), 600ms);
  ASSERT_EQ(probed.reports.size(), 1u);
  EXPECT_EQ(probed.reports[0].first, 600ms);
  EXPECT_GE(probed.reports[0].second, SchedulingLag::window);
}

TEST_F(SchedulingLagTest, LatenessBelowTheThresholdIsNotReported) {
  auto lag = start();
  step(SchedulingLag::probe_interval + 99ms);
  for (int i = 0; i < 110; ++i) step(SchedulingLag::probe_interval);
  lag.reset();
  std::lock_guard guard(probed.mutex);
  EXPECT_EQ(probed.observed.front(), 99ms);
  EXPECT_TRUE(probed.reports.empty());
}

}  // namespace
}  // namespace fleetcron::daemon
