#include "fleetcron/memory_coordination.h"

#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fleetcron/duration.h"

namespace fleetcron {
namespace {

constexpr std::chrono::nanoseconds min_ttl = std::chrono::milliseconds{1};

void check_ttl(std::string_view owner, std::string_view option, std::chrono::nanoseconds ttl) {
  if (ttl < min_ttl) {
    throw std::invalid_argument(std::string(owner) + " option " + std::string(option) + ": " + format_duration(ttl) +
                                " below minimum 1ms");
  }
}

}  // namespace

struct FLEETCRON_LOCAL MemoryClaimer::State {
  std::shared_ptr<Clock> clock;
  std::chrono::nanoseconds claim_ttl;
  mutable std::mutex mutex;  // guards the members below
  std::unordered_map<std::string, Clock::SteadyTime> claims;
  std::deque<std::pair<Clock::SteadyTime, std::string>> expiry_order;
  std::uint64_t fence_counter = 0;

  void purge_expired(Clock::SteadyTime now) {
    // Claims expire in the order they were made (one TTL for all).
    while (!expiry_order.empty() && expiry_order.front().first <= now) {
      claims.erase(expiry_order.front().second);
      expiry_order.pop_front();
    }
  }
};

MemoryClaimer::MemoryClaimer(std::shared_ptr<Clock> clock, std::chrono::nanoseconds claim_ttl)
    : state_(std::make_unique<State>()) {
  if (!clock) throw std::invalid_argument("MemoryClaimer: clock is null");
  check_ttl("MemoryClaimer", "claim_ttl", claim_ttl);
  state_->clock = std::move(clock);
  state_->claim_ttl = claim_ttl;
}

MemoryClaimer::~MemoryClaimer() = default;

ClaimResult MemoryClaimer::claim(std::string_view fire_key) {
  if (fire_key.find_first_not_of(" \t") == std::string_view::npos) return ClaimResult::failed("blank fire key");
  State& state = *state_;
  const auto now = state.clock->steady_now();
  std::lock_guard guard(state.mutex);
  state.purge_expired(now);
  const auto [it, inserted] = state.claims.try_emplace(std::string(fire_key), now + state.claim_ttl);
  if (!inserted) return ClaimResult::taken();
  state.expiry_order.emplace_back(it->second, it->first);
  return ClaimResult::claimed(++state.fence_counter);
}

std::vector<bool> MemoryClaimer::already_claimed(std::span<const std::string> fire_keys) {
  State& state = *state_;
  const auto now = state.clock->steady_now();
  std::lock_guard guard(state.mutex);
  state.purge_expired(now);
  std::vector<bool> claimed;
  claimed.reserve(fire_keys.size());
  for (const auto& key : fire_keys) claimed.push_back(state.claims.contains(key));
  return claimed;
}

std::chrono::nanoseconds MemoryClaimer::dedup_window() const { return state_->claim_ttl; }

std::size_t MemoryClaimer::size() const {
  std::lock_guard guard(state_->mutex);
  return state_->claims.size();
}

struct FLEETCRON_LOCAL MemoryLease::State {
  std::shared_ptr<Clock> clock;
  std::chrono::nanoseconds lease_ttl;
  mutable std::mutex mutex;  // guards the members below
  std::uint64_t holder = 0;  // 0: nobody
  Clock::SteadyTime expires{};
  std::uint64_t term = 0;
  std::uint64_t next_candidate = 1;
  std::unordered_map<std::uint64_t, std::function<void(std::uint64_t)>> listeners;

  Leadership campaign(std::uint64_t candidate);
  void resign(std::uint64_t candidate);
  void set_listener(std::uint64_t candidate, std::function<void(std::uint64_t)> lost) {
    std::lock_guard guard(mutex);
    listeners[candidate] = std::move(lost);
  }
};

class FLEETCRON_LOCAL MemoryLease::Replica final : public Elector {
 public:
  Replica(std::shared_ptr<MemoryLease::State> lease, std::uint64_t candidate)
      : lease_(std::move(lease)), candidate_(candidate) {}
  Leadership is_leader() override { return lease_->campaign(candidate_); }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override {
    lease_->set_listener(candidate_, std::move(lost));
  }
  void resign() override { lease_->resign(candidate_); }

 private:
  std::shared_ptr<MemoryLease::State> lease_;
  std::uint64_t candidate_;
};

MemoryLease::MemoryLease(std::shared_ptr<Clock> clock, std::chrono::nanoseconds lease_ttl)
    : state_(std::make_shared<State>()) {
  if (!clock) throw std::invalid_argument("MemoryLease: clock is null");
  check_ttl("MemoryLease", "lease_ttl", lease_ttl);
  state_->clock = std::move(clock);
  state_->lease_ttl = lease_ttl;
}

MemoryLease::~MemoryLease() = default;

std::shared_ptr<Elector> MemoryLease::make_elector() {
  std::lock_guard guard(state_->mutex);
  return std::make_shared<Replica>(state_, state_->next_candidate++);
}

std::uint64_t MemoryLease::term() const {
  std::lock_guard guard(state_->mutex);
  return state_->term;
}

Leadership MemoryLease::State::campaign(std::uint64_t candidate) {
  const auto now = clock->steady_now();
  std::function<void(std::uint64_t)> notify_lost;
  std::uint64_t lost_term = 0;
  Leadership result;
  {
    std::lock_guard guard(mutex);
    if (holder == candidate && now < expires) {
      expires = now + lease_ttl;  // renew
      return Leadership::leader(term);
    }
    if (holder != 0 && holder != candidate && now < expires) return Leadership::follower();
    // Free, expired, or our own lapsed lease: a new term either way.
    if (holder != 0) {
      if (auto it = listeners.find(holder); it != listeners.end()) notify_lost = it->second;
      lost_term = term;
    }
    holder = candidate;
    expires = now + lease_ttl;
    result = Leadership::leader(++term);
  }
  if (notify_lost) notify_lost(lost_term);  // never under our lock
  return result;
}

void MemoryLease::State::resign(std::uint64_t candidate) {
  std::function<void(std::uint64_t)> notify_lost;
  std::uint64_t lost_term = 0;
  {
    std::lock_guard guard(mutex);
    if (holder != candidate) return;
    holder = 0;
    lost_term = term;
    if (auto it = listeners.find(candidate); it != listeners.end()) notify_lost = it->second;
  }
  if (notify_lost) notify_lost(lost_term);
}

}  // namespace fleetcron
