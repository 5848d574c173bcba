// Scheduler load program: prints
//  1. add throughput and resident memory per entry for 1,000,000 entries;
//  2. sustained fires per second with no-op jobs (virtual clock, so the
//     number is the scheduler's own throughput, not the wall clock's pace);
//     and the heap allocations per fire on the dispatch path (loop, queue,
//     worker, run, events to a recorder);
//  3. fire lateness p50/p99/p99.9 on the real clock with 10,000 entries due
//     in the same second.
// Usage: scheduler_load [entries=1000000] [fire_entries=10000] [lateness_entries=10000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "allocation_counter.h"
#include "fleetcron/fleetcron.h"

using bench::allocations;

namespace {

using namespace std::chrono;
using namespace fleetcron;

// Workers of the throughput and lateness schedulers (env WORKERS, default 2).
std::size_t workers() { return std::getenv("WORKERS") ? std::strtoul(std::getenv("WORKERS"), nullptr, 10) : 2; }

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * 4096;
}

// Counts completed runs; wait_for() blocks (no spinning: the bench's own
// thread must not take a core from the workers it measures).
class Counter final : public Observer {
 public:
  void on_event(const Event& event) override {
    if (!std::holds_alternative<JobCompletedEvent>(event)) return;
    if (completed.fetch_add(1, std::memory_order_relaxed) + 1 < target.load(std::memory_order_relaxed)) return;
    std::lock_guard guard(mutex);
    cv.notify_all();
  }
  void wait_for(std::size_t count) {
    target.store(count);
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return completed.load() >= count; });
  }
  std::atomic<std::size_t> completed{0};
  std::atomic<std::size_t> target{0};
  std::mutex mutex;
  std::condition_variable cv;
};

void measure_add(std::size_t count) {
  SchedulerOptions options;
  options.logger = [](LogLevel, std::string_view) {};
  const long before = resident_bytes();
  const auto started = steady_clock::now();
  {
    Scheduler scheduler(options);
    const SchedulePtr schedule = parse_schedule("*/5 * * * *");
    for (std::size_t i = 0; i < count; ++i) scheduler.add(schedule, [](const FireContext&, std::stop_token) {});
    const double seconds = duration<double>(steady_clock::now() - started).count();
    const long after = resident_bytes();
    std::printf("add: %zu entries in %.3f s = %.0f entries/s; resident memory %.0f bytes/entry\n", count, seconds,
                static_cast<double>(count) / seconds,
                static_cast<double>(after - before) / static_cast<double>(count));
  }
}

void measure_throughput(std::size_t entries, int seconds_simulated) {
  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-01-01T00:00:00Z"));
  auto counter = std::make_shared<Counter>();
  SchedulerOptions options;
  options.clock = clock;
  options.recorder = counter;
  options.seconds_field = true;
  options.limits.max_concurrent = workers();
  options.logger = [](LogLevel, std::string_view) {};
  Scheduler scheduler(options);
  const SchedulePtr schedule = parse_schedule("* * * * * *", ParseOptions{SecondsField::required});
  for (std::size_t i = 0; i < entries; ++i) scheduler.add(schedule, [](const FireContext&, std::stop_token) {});
  scheduler.start();
  const std::size_t allocations_before = allocations.load();
  const auto started = steady_clock::now();
  for (int s = 1; s <= seconds_simulated; ++s) {
    clock->advance(seconds{1});
    counter->wait_for(entries * static_cast<std::size_t>(s));
  }
  const double elapsed = duration<double>(steady_clock::now() - started).count();
  const double allocated = static_cast<double>(allocations.load() - allocations_before);
  const double fires = static_cast<double>(entries) * seconds_simulated;
  std::printf("throughput: %.0f no-op fires in %.3f s = %.0f fires/s (%zu entries, %zu workers); %.2f allocations/fire\n",
              fires, elapsed, fires / elapsed, entries, workers(), allocated / fires);
  scheduler.stop(clock->steady_now() + seconds{10});
}

void measure_lateness(std::size_t entries) {
  std::vector<std::int64_t> lateness_ns(entries);
  std::atomic<std::size_t> done{0};
  SchedulerOptions options;
  options.limits.max_concurrent = workers();
  options.logger = [](LogLevel, std::string_view) {};
  Scheduler scheduler(options);
  const auto due = ceil<seconds>(system_clock::now()) + seconds{2};
  const SchedulePtr schedule = once_at(Instant{due});
  for (std::size_t i = 0; i < entries; ++i) {
    scheduler.add(schedule, [&](const FireContext& c, std::stop_token) {
      const auto late = system_clock::now() - c.scheduled_at;
      lateness_ns[done.fetch_add(1)] = duration_cast<nanoseconds>(late).count();
    });
  }
  scheduler.start();
  while (done.load() < entries) std::this_thread::sleep_for(milliseconds{10});
  scheduler.stop(steady_clock::now() + seconds{10});
  std::sort(lateness_ns.begin(), lateness_ns.end());
  auto pct = [&](double p) {
    return static_cast<double>(lateness_ns[static_cast<std::size_t>(p * static_cast<double>(entries - 1))]) / 1e6;
  };
  std::printf("lateness (%zu entries due at one instant, real clock, %zu workers): min %.3f ms, p50 %.3f ms, p99 %.3f ms, "
              "p99.9 %.3f ms, max %.3f ms\n",
              entries, workers(), pct(0.0), pct(0.50), pct(0.99), pct(0.999), static_cast<double>(lateness_ns.back()) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t entries = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const std::size_t fire_entries = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  const std::size_t lateness_entries = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 10'000;
  measure_add(entries);
  measure_throughput(fire_entries, 20);
  const int rounds = std::getenv("ROUNDS") ? std::atoi(std::getenv("ROUNDS")) : 1;
  for (int i = 0; i < rounds; ++i) measure_lateness(lateness_entries);
  return 0;
}
