// fleetcron — in-memory Claimer and Elector: the embedded default for one
// process, and for tests of several schedulers inside one process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"

namespace fleetcron {

/// Claims kept in memory for `claim_ttl` (default 10 minutes, at least 1 ms),
/// with fencing tokens from one counter. Expired claims are purged as new
/// ones arrive, so memory stays bounded by the claims of one TTL. Share one
/// instance between schedulers to make them one "fleet".
class FLEETCRON_API MemoryClaimer final : public Claimer {
 public:
  static constexpr std::chrono::nanoseconds default_claim_ttl = std::chrono::minutes{10};
  explicit MemoryClaimer(std::shared_ptr<Clock> clock, std::chrono::nanoseconds claim_ttl = default_claim_ttl);
  ~MemoryClaimer() override;
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  [[nodiscard]] std::vector<bool> already_claimed(std::span<const std::string> fire_keys) override;
  [[nodiscard]] bool tells_already_claimed() const override { return true; }
  /// claim_ttl: every replica shares this process's clock.
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override;
  /// Live (unexpired) claims right now.
  [[nodiscard]] std::size_t size() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// One lease shared by the electors made from it: the in-memory stand-in
/// for a Redis key or a NATS KV entry. The lease lasts `lease_ttl`
/// (default 30 s, at least 1 ms) after the holder's last is_leader() call.
class FLEETCRON_API MemoryLease {
 public:
  static constexpr std::chrono::nanoseconds default_lease_ttl = std::chrono::seconds{30};
  explicit MemoryLease(std::shared_ptr<Clock> clock, std::chrono::nanoseconds lease_ttl = default_lease_ttl);
  ~MemoryLease();

  /// A new elector (a "replica") competing for this lease; it keeps the
  /// lease's state alive.
  [[nodiscard]] std::shared_ptr<Elector> make_elector();

  /// The current term (0 before anyone led).
  [[nodiscard]] std::uint64_t term() const;

 private:
  struct State;
  class Replica;  // the electors
  std::shared_ptr<State> state_;
};

}  // namespace fleetcron
