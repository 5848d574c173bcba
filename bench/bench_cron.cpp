// Parse and next() cost for the six reference specs, in UTC and New York,
// each next() chained from the previous result, starting 2026-06-15 12:34:56.
// Counts heap allocations inside the timed loop (allocs_per_iter).
//   ./build/bench/bench_cron
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "allocation_counter.h"
#include "fleetcron/cron.h"
#include "fleetcron/rfc3339.h"

using bench::allocations;

namespace {

constexpr std::array<const char*, 6> specs{"0 0 * * *", "* * * * *",  "*/5 * * * *",
                                           "0 0 1 1 *", "0 0 * * 1", "15,45 14 * * *"};

fleetcron::ParseOptions options_for(bool new_york) {
  fleetcron::ParseOptions options;
  if (new_york) options.zone = fleetcron::TimeZone::locate("America/New_York");
  return options;
}

void BM_Parse(benchmark::State& state) {
  const std::string spec = specs[static_cast<std::size_t>(state.range(0))];
  const auto options = options_for(state.range(1) != 0);
  for (auto _ : state) {
    auto schedule = fleetcron::parse_schedule(spec, options);
    benchmark::DoNotOptimize(schedule);
  }
  state.SetLabel(std::string(state.range(1) ? "NY  " : "UTC ") + spec);
}

void BM_ParseWithZonePrefix(benchmark::State& state) {
  const std::string spec = std::string("TZ=America/New_York ") + specs[static_cast<std::size_t>(state.range(0))];
  for (auto _ : state) {
    auto schedule = fleetcron::parse_schedule(spec);
    benchmark::DoNotOptimize(schedule);
  }
  state.SetLabel(spec);
}

void BM_Next(benchmark::State& state) {
  const std::string spec = specs[static_cast<std::size_t>(state.range(0))];
  const auto schedule = fleetcron::parse_schedule(spec, options_for(state.range(1) != 0));
  const auto start = fleetcron::parse_rfc3339("2026-06-15T12:34:56Z");
  auto cursor = start;
  const std::size_t allocations_before = allocations.load();
  for (auto _ : state) {
    auto next = schedule->next(cursor);
    cursor = next ? *next : start;  // restart if a spec ever ran out
    benchmark::DoNotOptimize(cursor);
  }
  state.counters["allocs_per_iter"] = benchmark::Counter(
      static_cast<double>(allocations.load() - allocations_before) / static_cast<double>(state.iterations()));
  state.SetLabel(std::string(state.range(1) ? "NY  " : "UTC ") + spec);
}

BENCHMARK(BM_Parse)->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}});
BENCHMARK(BM_ParseWithZonePrefix)->DenseRange(0, 5);
BENCHMARK(BM_Next)->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}});

}  // namespace

BENCHMARK_MAIN();
