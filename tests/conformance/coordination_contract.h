// The coordination contract, written once: what every Claimer and Elector
// must do, as parameterized tests instantiated for each backend (memory in
// the scheduler tests, Redis and NATS in theirs, against real servers).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "fleetcron/coordination.h"

namespace fleetcron::test {

/// One coordination namespace on one store: the claimers and electors made
/// from it are replicas of one fleet, competing with each other and with
/// nothing else.
class ContractFleet {
 public:
  virtual ~ContractFleet() = default;
  /// A new replica's claimer.
  virtual std::shared_ptr<Claimer> claimer() = 0;
  /// A new replica's elector.
  virtual std::shared_ptr<Elector> elector() = 0;
  /// The claims' time to live.
  [[nodiscard]] virtual std::chrono::nanoseconds claim_ttl() const = 0;
  /// Ends the current lease as its expiry would (memory: the clock moves
  /// past the TTL; Redis and NATS: the lease record is deleted).
  virtual void end_lease() = 0;
  /// Makes the store unreachable (stops the server). Only for backends
  /// that have a store to lose (ContractBackend::networked).
  virtual void lose_store() = 0;
  /// How long a handover may take on this backend (real time).
  [[nodiscard]] virtual std::chrono::milliseconds handover_bound() const = 0;
};

struct ContractBackend {
  std::string name;
  /// A fleet; `private_store`: on a store of its own (lose_store() needs it).
  std::function<std::unique_ptr<ContractFleet>(bool private_store)> make;
};

inline std::ostream& operator<<(std::ostream& out, const ContractBackend& backend) { return out << backend.name; }

/// Claimer and Elector contract: every backend.
class CoordinationContract : public ::testing::TestWithParam<ContractBackend> {};
/// Failing closed when the store is lost: backends with a store to lose.
class StoreLossContract : public ::testing::TestWithParam<ContractBackend> {};

/// Fire keys for instants an hour ahead (after any store-reset epoch), one
/// per second from `first`.
std::string future_fire_key(const std::string& job, int second);

}  // namespace fleetcron::test
