// Zones and schedules used from many threads at once: in the scheduler's
// executable, which the ThreadSanitizer build compiles (the unit tests'
// executable pulls in the whole daemon library for one test).
#include <atomic>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "fleetcron/cron.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/time_zone.h"

namespace fleetcron {
namespace {

TEST(TimeZone, ConcurrentFirstUseIsSafe) {
  // Run under TSan: many threads locate zones and compute fires at once.
  std::vector<std::thread> threads;
  std::atomic<int> fires{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([i, &fires] {
      const char* names[] = {"Asia/Tokyo", "Europe/Paris", "America/Chicago", "Pacific/Auckland"};
      ParseOptions options;
      options.zone = TimeZone::locate(names[i % 4]);
      const auto schedule = parse_schedule("*/5 * * * *", options);
      Instant cursor = parse_rfc3339("2026-01-01T00:00:00Z");
      for (int k = 0; k < 1000; ++k) {
        cursor = *schedule->next(cursor);
        fires.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(fires.load(), 8000);
}

}  // namespace
}  // namespace fleetcron
