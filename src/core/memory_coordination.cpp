#include "fleetcron/memory_coordination.h"

#include <stdexcept>
#include <string>

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

MemoryClaimer::MemoryClaimer(std::shared_ptr<Clock> clock, std::chrono::nanoseconds claim_ttl)
    : clock_(std::move(clock)), claim_ttl_(claim_ttl) {
  if (!clock_) throw std::invalid_argument("MemoryClaimer: clock is null");
  check_ttl("MemoryClaimer", "claim_ttl", claim_ttl_);
}

ClaimResult MemoryClaimer::claim(std::string_view fire_key) {
  if (fire_key.find_first_not_of(" \t") == std::string_view::npos) return ClaimResult::failed("blank fire key");
  const auto now = clock_->steady_now();
  std::lock_guard guard(mutex_);
  purge_expired(now);
  const auto [it, inserted] = claims_.try_emplace(std::string(fire_key), now + claim_ttl_);
  if (!inserted) return ClaimResult::taken();
  expiry_order_.emplace_back(it->second, it->first);
  return ClaimResult::claimed(++fence_counter_);
}

std::size_t MemoryClaimer::size() const {
  std::lock_guard guard(mutex_);
  return claims_.size();
}

void MemoryClaimer::purge_expired(Clock::SteadyTime now) {
  // Claims expire in the order they were made (one TTL for all).
  while (!expiry_order_.empty() && expiry_order_.front().first <= now) {
    claims_.erase(expiry_order_.front().second);
    expiry_order_.pop_front();
  }
}

class MemoryElector final : public Elector {
 public:
  MemoryElector(std::shared_ptr<MemoryLease> lease, std::uint64_t candidate)
      : lease_(std::move(lease)), candidate_(candidate) {}
  Leadership is_leader() override { return lease_->campaign(candidate_); }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override {
    lease_->set_listener(candidate_, std::move(lost));
  }
  void resign() override { lease_->resign(candidate_); }

 private:
  std::shared_ptr<MemoryLease> lease_;
  std::uint64_t candidate_;
};

MemoryLease::MemoryLease(std::shared_ptr<Clock> clock, std::chrono::nanoseconds lease_ttl)
    : clock_(std::move(clock)), lease_ttl_(lease_ttl) {
  if (!clock_) throw std::invalid_argument("MemoryLease: clock is null");
  check_ttl("MemoryLease", "lease_ttl", lease_ttl_);
}

std::shared_ptr<Elector> MemoryLease::make_elector() {
  std::lock_guard guard(mutex_);
  return std::make_shared<MemoryElector>(shared_from_this(), next_candidate_++);
}

std::uint64_t MemoryLease::term() const {
  std::lock_guard guard(mutex_);
  return term_;
}

Leadership MemoryLease::campaign(std::uint64_t candidate) {
  const auto now = clock_->steady_now();
  std::function<void(std::uint64_t)> notify_lost;
  std::uint64_t lost_term = 0;
  Leadership result;
  {
    std::lock_guard guard(mutex_);
    if (holder_ == candidate && now < expires_) {
      expires_ = now + lease_ttl_;  // renew
      return Leadership::leader(term_);
    }
    if (holder_ != 0 && holder_ != candidate && now < expires_) return Leadership::follower();
    // Free, expired, or our own lapsed lease: a new term either way.
    if (holder_ != 0) {
      if (auto it = listeners_.find(holder_); it != listeners_.end()) notify_lost = it->second;
      lost_term = term_;
    }
    holder_ = candidate;
    expires_ = now + lease_ttl_;
    result = Leadership::leader(++term_);
  }
  if (notify_lost) notify_lost(lost_term);  // never under our lock
  return result;
}

void MemoryLease::resign(std::uint64_t candidate) {
  std::function<void(std::uint64_t)> notify_lost;
  std::uint64_t lost_term = 0;
  {
    std::lock_guard guard(mutex_);
    if (holder_ != candidate) return;
    holder_ = 0;
    lost_term = term_;
    if (auto it = listeners_.find(candidate); it != listeners_.end()) notify_lost = it->second;
  }
  if (notify_lost) notify_lost(lost_term);
}

void MemoryLease::set_listener(std::uint64_t candidate, std::function<void(std::uint64_t)> lost) {
  std::lock_guard guard(mutex_);
  listeners_[candidate] = std::move(lost);
}

}  // namespace fleetcron
