// NATS claim load program: 10,000 fires due at once (by default), decided
//  1. by Claimer::claim_batch(): pipelined creates (Claimer::max_batch per
//     round trip) and one read of the stream's times per round trip;
//  2. as before claim_batch() existed: one claim() per fire (a create and
//     a read of its write time, each a round trip) — the reference, in the
//     same run;
//  3. by a second replica's claim_batch() over the same fires, all taken.
// Prints claims/s of each and the ratio batch / sequential.
// Usage: nats_claims NATS_URL [fires=10000] [rounds=5]
// bench/nats_bench.sh starts a nats-server and runs it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fleetcron/nats/coordination.h"

namespace {

using namespace std::chrono;
using namespace fleetcron;

double seconds_since(steady_clock::time_point start) { return duration<double>(steady_clock::now() - start).count(); }

std::vector<std::string> fresh_keys(const std::string& job, int fires) {
  const auto at = floor<seconds>(system_clock::now()) + minutes{3};  // after the new bucket's creation + its skew guard (2m30s)
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(fires));
  for (int i = 0; i < fires; ++i) keys.push_back(fire_key(job + "-" + std::to_string(i), Instant{at.time_since_epoch()}));
  return keys;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

long count(const std::vector<ClaimResult>& results, ClaimResult::Status status) {
  return static_cast<long>(std::count_if(results.begin(), results.end(), [&](const ClaimResult& r) { return r.status == status; }));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nats_claims NATS_URL [fires=10000] [rounds=5]\n");
    return 2;
  }
  const int fires = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  nats::ConnectionOptions options;
  options.servers = {argv[1]};
  auto connection = nats::Connection::connect(options);
  const std::string run = std::to_string(steady_clock::now().time_since_epoch().count() % 1000000007);
  auto bucket = connection->bucket(nats::BucketConfig{.name = "BENCH_" + run, .ttl = minutes{10}, .storage = nats::Storage::file});
  nats::Claimer claimer(bucket), other(bucket);
  (void)claimer.claim(fire_key("warm-up", Instant{floor<seconds>(system_clock::now()).time_since_epoch()}));

  std::vector<double> batch_rates, taken_rates;
  for (int round = 0; round < rounds; ++round) {
    const auto keys = fresh_keys("batch-" + std::to_string(round), fires);
    auto start = steady_clock::now();
    const auto results = claimer.claim_batch(keys);
    batch_rates.push_back(fires / seconds_since(start));
    if (count(results, ClaimResult::Status::claimed) != fires) {
      std::fprintf(stderr, "batch round %d: %ld of %d claimed (%s)\n", round, count(results, ClaimResult::Status::claimed),
                   fires, results.front().error.c_str());
      return 1;
    }
    start = steady_clock::now();
    const auto taken = other.claim_batch(keys);
    taken_rates.push_back(fires / seconds_since(start));
    if (count(taken, ClaimResult::Status::already_claimed) != fires) {
      std::fprintf(stderr, "round %d: the second replica found %ld of %d taken\n", round,
                   count(taken, ClaimResult::Status::already_claimed), fires);
      return 1;
    }
  }
  std::printf("batch path: %d fires due at once, claim_batch: median %.0f claims/s over %d rounds\n", fires,
              median(batch_rates), rounds);
  std::printf("contended: a second replica's claim_batch of the same fires (all taken): median %.0f decisions/s\n",
              median(taken_rates));

  std::vector<double> latencies;
  const auto keys = fresh_keys("one", fires);
  const auto start = steady_clock::now();
  for (const auto& key : keys) {
    const auto one = steady_clock::now();
    if (claimer.claim(key).status != ClaimResult::Status::claimed) {
      std::fprintf(stderr, "sequential claim of %s failed\n", key.c_str());
      return 1;
    }
    latencies.push_back(seconds_since(one) * 1e6);
  }
  const double sequential_rate = fires / seconds_since(start);
  std::sort(latencies.begin(), latencies.end());
  std::printf("sequential path (the reference: one claim() per fire, as before claim_batch): %d fires: %.0f claims/s, "
              "latency p50 %.0f us, p99 %.0f us\n",
              fires, sequential_rate, latencies[latencies.size() / 2], latencies[latencies.size() * 99 / 100]);
  std::printf("ratio: batch / sequential = %.1f\n", median(batch_rates) / sequential_rate);
  connection->delete_bucket(bucket->name());
  return 0;
}
