#include "daemon/run/coordination_setup.h"

#include <fmt/format.h>

#include <chrono>

namespace fleetcron::daemon {

namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

/// Times claims and counts their failures.
class MeasuredClaimer final : public Claimer {
 public:
  MeasuredClaimer(std::shared_ptr<Claimer> inner, Metrics& metrics) : inner_(std::move(inner)), metrics_(metrics) {}
  ClaimResult claim(std::string_view fire_key) override {
    const auto start = SteadyClock::now();
    ClaimResult result = inner_->claim(fire_key);
    record(result, start);
    return result;
  }
  std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys) override {
    const auto start = SteadyClock::now();
    std::vector<ClaimResult> results = inner_->claim_batch(fire_keys);
    metrics_.backend_latency(seconds_since(start));
    for (const auto& result : results) {
      if (result.status == ClaimResult::Status::error) metrics_.backend_error();
    }
    return results;
  }
  // Forwarded, or the fires queued behind busy workers would be claimed
  // one by one (the fleet benchmark counts the store's commands).
  std::vector<bool> already_claimed(std::span<const std::string> fire_keys) override {
    const auto start = SteadyClock::now();
    std::vector<bool> claimed = inner_->already_claimed(fire_keys);
    metrics_.backend_latency(seconds_since(start));
    return claimed;
  }
  bool tells_already_claimed() const override { return inner_->tells_already_claimed(); }
  // Forwarded, or the scheduler would claim fires of any age (the chaos
  // run found it: a daemon paused past the claim TTL ran fires again).
  std::chrono::nanoseconds dedup_window() const override { return inner_->dedup_window(); }
  void check_entry_key(std::string_view key) const override { inner_->check_entry_key(key); }

 private:
  void record(const ClaimResult& result, SteadyClock::time_point start) {
    metrics_.backend_latency(seconds_since(start));
    if (result.status == ClaimResult::Status::error) metrics_.backend_error();
  }
  std::shared_ptr<Claimer> inner_;
  Metrics& metrics_;
};

/// Times elections, counts failures, and reports leadership to the metrics.
class MeasuredElector final : public Elector {
 public:
  MeasuredElector(std::shared_ptr<Elector> inner, Metrics& metrics) : inner_(std::move(inner)), metrics_(metrics) {}
  Leadership is_leader() override {
    const auto start = SteadyClock::now();
    Leadership answer = inner_->is_leader();
    metrics_.backend_latency(seconds_since(start));
    if (answer.status == Leadership::Status::error) metrics_.backend_error();
    metrics_.leader(answer.status == Leadership::Status::leader, answer.term);
    return answer;
  }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override {
    inner_->on_leadership_lost([this, lost](std::uint64_t term) {
      metrics_.leader(false, term);
      if (lost) lost(term);
    });
    if (!lost) inner_->on_leadership_lost({});
  }
  void resign() override { inner_->resign(); }
  void set_liveness(std::function<bool()> alive) override { inner_->set_liveness(std::move(alive)); }

 private:
  std::shared_ptr<Elector> inner_;
  Metrics& metrics_;
};

}  // namespace

std::vector<ReplicaSetting> dedup_settings(const Settings& settings) {
  return backend_for(settings.coordinator).dedup_settings(settings);
}

std::shared_ptr<Claimer> make_offline_claimer(const Settings& settings) {
  return backend_for(settings.coordinator).offline_claimer(settings);
}

Coordination make_coordination(const Settings& settings, Metrics& metrics, const std::string& holder) {
  Coordination out = backend_for(settings.coordinator).connect(settings, holder);
  if (out.claimer) out.claimer = std::make_shared<MeasuredClaimer>(std::move(out.claimer), metrics);
  if (out.elector) out.elector = std::make_shared<MeasuredElector>(std::move(out.elector), metrics);
  out.replica_settings = dedup_settings(settings);
  return out;
}

}  // namespace fleetcron::daemon
