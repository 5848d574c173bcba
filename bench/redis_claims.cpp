// Redis claim load program: prints
//  1. the batch path: claims per second when 10,000 fires are due at once,
//     decided by Claimer::claim_batch() (one pipelined round trip);
//  2. the added latency per fire: one claim() round trip, p50/p99/mean;
//  3. end to end: three schedulers sharing the server, 10,000 entries due
//     at the same instant each, until all 30,000 fires are decided — first
//     without a fleet state, then with each entry's cursor kept in Redis
//     (redis::FleetState, as the daemon runs), and the ratio of the two.
// Usage: redis_claims REDIS_URI [fires=10000] [rounds=10] [batch]
// ("batch": the batch path alone, so that a script can read the server's
// CPU around it).
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
#include <thread>
#include <vector>

#include "fleetcron/fleetcron.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/fleet_state.h"

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

// Counts cursor reads: each entry's catch-up reads its cursor once at
// start, so the measurement begins after every replica has read them all.
class CountingFleetState final : public FleetState {
 public:
  explicit CountingFleetState(std::shared_ptr<FleetState> inner) : inner_(std::move(inner)) {}
  CursorRead read_cursor(std::string_view job) override {
    CursorRead read = inner_->read_cursor(job);
    reads.fetch_add(1);
    return read;
  }
  CursorAdvance advance_cursor(std::string_view job, Instant at, std::uint64_t digest, nanoseconds keep) override {
    return inner_->advance_cursor(job, at, digest, keep);
  }
  std::vector<CursorAdvance> advance_cursors(std::span<const CursorAdvanceRequest> requests) override {
    return inner_->advance_cursors(requests);
  }
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant at, std::uint64_t digest,
                              nanoseconds keep, std::string_view claimant) override {
    return inner_->claim_catch_up(job, seen, at, digest, keep, claimant);
  }
  std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override {
    auto results = inner_->record_fires(writes);
    for (std::size_t i = 0; i < results.size(); ++i) {
      // Outcomes: a run's running record may go with its outcome, unwritten.
      if (results[i].status != LedgerWriteResult::Status::error && writes[i].record.fate != FireFate::running) {
        recorded.fetch_add(1);
      }
    }
    return results;
  }
  LedgerRead read_fires(std::string_view job, std::size_t limit) override { return inner_->read_fires(job, limit); }
  StoredDocument load_document(DocumentId which) override { return inner_->load_document(which); }
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    return inner_->replace_document(which, seen, text, keep_for);
  }
  std::atomic<std::size_t> reads{0};
  std::atomic<std::size_t> recorded{0};  // outcomes the store took

 private:
  std::shared_ptr<FleetState> inner_;
};

enum class FleetStateUse { none, cursors, cursors_and_ledger };

// All fires decided per second (and, with the ledger, all their records
// written: a running and a finished record per run).
double end_to_end(const std::string& uri, std::size_t fires, FleetStateUse use) {
  const bool with_cursors = use != FleetStateUse::none;
  const bool with_ledger = use == FleetStateUse::cursors_and_ledger;
  // The schedulers' virtual clock an hour ahead (past a new store's reset
  // bound); the claimers keep the real one for the skew guard.
  auto clock = std::make_shared<VirtualClock>(
      Instant{duration_cast<nanoseconds>(system_clock::now().time_since_epoch())} + hours{1});
  const std::string prefix = "bench:" + run_id() + ":";
  auto decided = std::make_shared<Decided>();
  std::atomic<std::size_t> ran{0};
  std::vector<std::unique_ptr<Scheduler>> replicas;
  std::vector<std::shared_ptr<CountingFleetState>> states;
  for (int r = 0; r < 3; ++r) {
    SchedulerOptions options;
    options.clock = clock;
    if (with_cursors) {
      states.push_back(std::make_shared<CountingFleetState>(std::make_shared<redis::FleetState>(
          std::make_shared<redis::Client>(redis::parse_uri(uri).connection), redis::FleetStateOptions{.fleet_prefix = prefix + "fleet:"})));
      options.fleet.state = states.back();
      options.fleet.ledger = with_ledger;
    }
    options.recorder = decided;
    options.limits.max_queued = fires;
    options.claimer = std::make_shared<redis::Claimer>(std::make_shared<redis::Client>(redis::parse_uri(uri).connection),
                                                       redis::ClaimerOptions{.claim_prefix = prefix});
    auto scheduler = std::make_unique<Scheduler>(options);
    for (std::size_t i = 0; i < fires; ++i) {
      scheduler->add(aligned_every(seconds{1}), [&ran](const FireContext&, std::stop_token) { ran.fetch_add(1); },
                     EntryOptions{.key = "job" + std::to_string(i)});
    }
    scheduler->start();
    replicas.push_back(std::move(scheduler));
  }
  for (const auto& state : states) {
    while (state->reads.load() < fires) std::this_thread::sleep_for(milliseconds{10});  // start-up, not measured
  }
  const auto start = steady_clock::now();
  clock->advance(seconds{1});
  {
    std::unique_lock lock(decided->mutex);
    decided->cv.wait(lock, [&] { return decided->count >= 3 * fires; });
  }
  const auto recorded = [&] {
    std::size_t sum = 0;
    for (const auto& state : states) sum += state->recorded.load();
    return sum;
  };
  while (with_ledger && recorded() < fires) std::this_thread::sleep_for(microseconds{200});
  const double elapsed = seconds_since(start);
  for (auto& scheduler : replicas) scheduler->stop(clock->steady_now() + seconds{30});
  const double rate = static_cast<double>(3 * fires) / elapsed;
  std::printf("end to end%s: 3 schedulers x %zu entries due at one instant: %zu runs (each fire once), all %zu fires "
              "decided in %.1f ms = %.0f fires/s\n",
              with_ledger ? " with cursors and ledger" : with_cursors ? " with cursors" : "", fires, ran.load(), 3 * fires, elapsed * 1e3, rate);
  if (ran.load() != fires) std::exit(1);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: redis_claims REDIS_URI [fires=10000] [rounds=10] [batch]\n");
    return 2;
  }
  const std::string uri = argv[1];
  const std::size_t fires = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10;
  try {
    auto client = std::make_shared<redis::Client>(redis::parse_uri(uri).connection);
    client->ping();
    batch_path(client, fires, rounds);
    if (argc > 4 && std::string(argv[4]) == "batch") return 0;
    latency(client, std::max(rounds * 200, 100));
    const double without = end_to_end(uri, fires, FleetStateUse::none);
    const double cursors = end_to_end(uri, fires, FleetStateUse::cursors);
    const double ledger = end_to_end(uri, fires, FleetStateUse::cursors_and_ledger);
    std::printf("ratio: end to end with cursors / without = %.2f\n", cursors / without);
    std::printf("ratio: end to end with cursors and ledger (every record written) / without the fleet state = %.2f, "
                "/ with cursors only = %.2f\n",
                ledger / without, ledger / cursors);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redis_claims: %s\n", e.what());
    return 1;
  }
  return 0;
}
