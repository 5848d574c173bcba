// PostgreSQL claim load program: prints
//  1. the batch path: claims per second when `fires` fires are due at once,
//     decided by Claimer::claim_batch() (1,000 fires per statement);
//  2. the sequential path: claims per second of one claim() per fire (one
//     round trip each), and its latency p50/p99;
//  3. the ratio of the two.
// Usage: postgres_claims POSTGRES_URI [fires=10000] [rounds=5]
// bench/postgres_bench.sh starts a cluster, runs pgbench with the
// reference's INSERT … ON CONFLICT beside this program and prints the ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/uri.h"

namespace {

using namespace std::chrono;
using namespace fleetcron;

double seconds_since(steady_clock::time_point start) { return duration<double>(steady_clock::now() - start).count(); }

std::vector<std::string> fresh_keys(const std::string& job, int fires) {
  const auto at = floor<seconds>(system_clock::now());  // due now: inside the skew guard
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(fires));
  for (int i = 0; i < fires; ++i) keys.push_back(fire_key(job + "-" + std::to_string(i), Instant{at.time_since_epoch()}));
  return keys;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: postgres_claims POSTGRES_URI [fires=10000] [rounds=5]\n");
    return 2;
  }
  const int fires = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  const auto options = postgres::parse_uri(argv[1]);
  auto connection = std::make_shared<postgres::Connection>(options.connection);
  (void)postgres::migrate(*connection, options.tables);
  postgres::Claimer claimer(connection, {.tables = options.tables, .cleanup_interval = nanoseconds{0}});
  const std::string run = std::to_string(steady_clock::now().time_since_epoch().count());

  std::vector<double> batch_rates;
  for (int round = 0; round < rounds; ++round) {
    const auto keys = fresh_keys("batch-" + run + "-" + std::to_string(round), fires);
    const auto start = steady_clock::now();
    const auto results = claimer.claim_batch(keys);
    const double took = seconds_since(start);
    const auto claimed = std::count_if(results.begin(), results.end(),
                                       [](const ClaimResult& r) { return r.status == ClaimResult::Status::claimed; });
    if (claimed != fires) {
      std::fprintf(stderr, "batch round %d: %ld of %d claimed (%s)\n", round, static_cast<long>(claimed), fires,
                   results.front().error.c_str());
      return 1;
    }
    batch_rates.push_back(fires / took);
  }
  std::printf("batch path: %d fires due at once, claim_batch: median %.0f claims/s over %d rounds\n", fires,
              median(batch_rates), rounds);

  const int sequential = std::min(fires, 2000);
  std::vector<double> latencies;
  const auto keys = fresh_keys("one-" + run, sequential);
  const auto start = steady_clock::now();
  for (const auto& key : keys) {
    const auto one = steady_clock::now();
    if (claimer.claim(key).status != ClaimResult::Status::claimed) {
      std::fprintf(stderr, "sequential claim of %s failed\n", key.c_str());
      return 1;
    }
    latencies.push_back(seconds_since(one) * 1e6);
  }
  const double sequential_rate = sequential / seconds_since(start);
  std::sort(latencies.begin(), latencies.end());
  std::printf("sequential path: %d claim() calls: %.0f claims/s, latency p50 %.0f us, p99 %.0f us\n", sequential,
              sequential_rate, latencies[latencies.size() / 2], latencies[latencies.size() * 99 / 100]);
  std::printf("ratio: batch / sequential = %.1f\n", median(batch_rates) / sequential_rate);
  return 0;
}
