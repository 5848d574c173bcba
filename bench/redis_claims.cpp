// Redis claim load program: prints
//  1. the batch path: claims per second when 10,000 fires are due at once,
//     decided by Claimer::claim_batch() (one pipelined round trip);
//  2. the added latency per fire: one claim() round trip, p50/p99/mean;
//  3. end to end: three schedulers sharing the server, 10,000 entries due
//     at the same instant each, until all 30,000 fires are decided.
// Usage: redis_claims REDIS_URI [fires=10000] [rounds=10]
// bench/redis_bench.sh starts a server, runs redis-benchmark -P 16 next to
// this program and prints the ratio.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "fleetcron/fleetcron.h"
#include "fleetcron/redis/claimer.h"

namespace {

using namespace std::chrono;
using namespace fleetcron;

double seconds_since(steady_clock::time_point start) {
  return duration<double>(steady_clock::now() - start).count();
}

std::string run_id() { return std::to_string(steady_clock::now().time_since_epoch().count()); }

// Fires an hour from now: each run uses a fresh key prefix, a new store to
// the claimer, whose first max_clock_skew of fires are refused as
// store-reset (docs/redis.md); fires this far ahead are past that bound.
std::string in_an_hour() {
  return format_rfc3339(time_point_cast<seconds>(Instant{duration_cast<nanoseconds>(system_clock::now().time_since_epoch())}) + hours{1});
}

void batch_path(const std::shared_ptr<redis::Client>& client, std::size_t fires, int rounds) {
  redis::Claimer claimer(client, {.claim_prefix = "bench:" + run_id() + ":"});
  std::vector<double> rates;
  const std::string at = in_an_hour();
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> keys;
    keys.reserve(fires);
    for (std::size_t i = 0; i < fires; ++i) {
      keys.push_back("job" + std::to_string(i) + "-" + std::to_string(round) + "@" + at);
    }
    const auto start = steady_clock::now();
    const auto results = claimer.claim_batch(keys);
    const double elapsed = seconds_since(start);
    const auto claimed = std::count_if(results.begin(), results.end(),
                                       [](const ClaimResult& r) { return r.status == ClaimResult::Status::claimed; });
    if (static_cast<std::size_t>(claimed) != fires) {
      std::fprintf(stderr, "round %d: %zd of %zu claimed (%s)\n", round, claimed, fires, results.front().error.c_str());
      std::exit(1);
    }
    rates.push_back(static_cast<double>(fires) / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("batch path: %zu fires due at once, claim_batch(): median %.0f claims/s (min %.0f, max %.0f) over %d rounds\n",
              fires, rates[rates.size() / 2], rates.front(), rates.back(), rounds);
}

void latency(const std::shared_ptr<redis::Client>& client, int count) {
  redis::Claimer claimer(client, {.claim_prefix = "bench:" + run_id() + ":"});
  std::vector<double> micros;
  micros.reserve(static_cast<std::size_t>(count));
  const std::string at = in_an_hour();
  for (int i = 0; i < count; ++i) {
    const auto start = steady_clock::now();
    const auto result = claimer.claim("single" + std::to_string(i) + "@" + at);
    micros.push_back(seconds_since(start) * 1e6);
    if (result.status != ClaimResult::Status::claimed) {
      std::fprintf(stderr, "claim failed: %s\n", result.error.c_str());
      std::exit(1);
    }
  }
  std::sort(micros.begin(), micros.end());
  double sum = 0;
  for (const double m : micros) sum += m;
  std::printf("added latency per fire (one claim() round trip, %d claims): p50 %.0f us, p99 %.0f us, mean %.0f us\n",
              count, micros[micros.size() / 2], micros[micros.size() * 99 / 100], sum / count);
}

class Decided final : public Observer {
 public:
  void on_event(const Event& event) override {
    if (std::holds_alternative<JobCompletedEvent>(event) || std::holds_alternative<SkippedFireEvent>(event)) {
      std::lock_guard guard(mutex);
      ++count;
      cv.notify_all();
    }
    if (const auto* skipped = std::get_if<SkippedFireEvent>(&event);
        skipped != nullptr && skipped->reason != SkipReason::already_claimed) {
      std::fprintf(stderr, "unexpected skip: %s %s\n", std::string(to_string(skipped->reason)).c_str(),
                   skipped->error.c_str());
      std::exit(1);
    }
  }
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t count = 0;
};

void end_to_end(const std::string& uri, std::size_t fires) {
  // The schedulers' virtual clock an hour ahead (past a new store's reset
  // bound); the claimers keep the real one for the skew guard.
  auto clock = std::make_shared<VirtualClock>(
      Instant{duration_cast<nanoseconds>(system_clock::now().time_since_epoch())} + hours{1});
  const std::string prefix = "bench:" + run_id() + ":";
  auto decided = std::make_shared<Decided>();
  std::atomic<std::size_t> ran{0};
  std::vector<std::unique_ptr<Scheduler>> replicas;
  for (int r = 0; r < 3; ++r) {
    SchedulerOptions options;
    options.clock = clock;
    options.recorder = decided;
    options.max_queued = fires;
    options.claimer = std::make_shared<redis::Claimer>(std::make_shared<redis::Client>(redis::parse_uri(uri)),
                                                       redis::ClaimerOptions{.claim_prefix = prefix});
    auto scheduler = std::make_unique<Scheduler>(options);
    for (std::size_t i = 0; i < fires; ++i) {
      scheduler->add(aligned_every(seconds{1}), [&ran](const FireContext&, std::stop_token) { ran.fetch_add(1); },
                     EntryOptions{.key = "job" + std::to_string(i)});
    }
    scheduler->start();
    replicas.push_back(std::move(scheduler));
  }
  const auto start = steady_clock::now();
  clock->advance(seconds{1});
  {
    std::unique_lock lock(decided->mutex);
    decided->cv.wait(lock, [&] { return decided->count >= 3 * fires; });
  }
  const double elapsed = seconds_since(start);
  for (auto& scheduler : replicas) scheduler->stop(clock->steady_now() + seconds{30});
  std::printf("end to end: 3 schedulers x %zu entries due at one instant: %zu runs (each fire once), all %zu fires "
              "decided in %.1f ms = %.0f claims/s\n",
              fires, ran.load(), 3 * fires, elapsed * 1e3, static_cast<double>(3 * fires) / elapsed);
  if (ran.load() != fires) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: redis_claims REDIS_URI [fires=10000] [rounds=10]\n");
    return 2;
  }
  const std::string uri = argv[1];
  const std::size_t fires = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10;
  try {
    auto client = std::make_shared<redis::Client>(redis::parse_uri(uri));
    client->ping();
    batch_path(client, fires, rounds);
    latency(client, std::max(rounds * 200, 100));
    end_to_end(uri, fires);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redis_claims: %s\n", e.what());
    return 1;
  }
  return 0;
}
