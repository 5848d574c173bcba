// fleetcron — in-memory Claimer and Elector: the embedded default for one
// process, and for tests of several schedulers inside one process.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"

namespace fleetcron {

/// Claims kept in memory for `claim_ttl` (default 10 minutes, at least 1 ms),
/// with fencing tokens from one counter. Expired claims are purged as new
/// ones arrive, so memory stays bounded by the claims of one TTL. Share one
/// instance between schedulers to make them one "fleet".
class MemoryClaimer final : public Claimer {
 public:
  explicit MemoryClaimer(std::shared_ptr<Clock> clock, std::chrono::nanoseconds claim_ttl = std::chrono::minutes{10});
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  /// claim_ttl: every replica shares this process's clock.
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override { return claim_ttl_; }
  /// Live (unexpired) claims right now.
  [[nodiscard]] std::size_t size() const;

 private:
  void purge_expired(Clock::SteadyTime now);

  std::shared_ptr<Clock> clock_;
  std::chrono::nanoseconds claim_ttl_;
  mutable std::mutex mutex_;  // guards the members below
  std::unordered_map<std::string, Clock::SteadyTime> claims_;
  std::deque<std::pair<Clock::SteadyTime, std::string>> expiry_order_;
  std::uint64_t fence_counter_ = 0;
};

/// One lease shared by the MemoryElectors made from it: the in-memory
/// stand-in for a Redis key or a NATS KV entry. The lease lasts `lease_ttl`
/// (default 30 s, at least 1 ms) after the holder's last is_leader() call.
class MemoryLease : public std::enable_shared_from_this<MemoryLease> {
 public:
  static constexpr std::chrono::nanoseconds default_lease_ttl = std::chrono::seconds{30};
  explicit MemoryLease(std::shared_ptr<Clock> clock, std::chrono::nanoseconds lease_ttl = default_lease_ttl);

  /// A new elector (a "replica") competing for this lease.
  [[nodiscard]] std::shared_ptr<Elector> make_elector();

  /// The current term (0 before anyone led).
  [[nodiscard]] std::uint64_t term() const;

 private:
  friend class MemoryElector;
  Leadership campaign(std::uint64_t candidate);
  void resign(std::uint64_t candidate);
  void set_listener(std::uint64_t candidate, std::function<void(std::uint64_t)> lost);

  std::shared_ptr<Clock> clock_;
  std::chrono::nanoseconds lease_ttl_;
  mutable std::mutex mutex_;  // guards the members below
  std::uint64_t holder_ = 0;  // 0: nobody
  Clock::SteadyTime expires_{};
  std::uint64_t term_ = 0;
  std::uint64_t next_candidate_ = 1;
  std::unordered_map<std::uint64_t, std::function<void(std::uint64_t)>> listeners_;
};

}  // namespace fleetcron
