// The fleet-state contract, written once (docs/fleet-state.md): what every
// FleetState must do, as parameterized tests instantiated for each backend
// (memory in the scheduler tests; Redis and NATS as their FleetState
// lands).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "fleetcron/fleet_state.h"

namespace fleetcron::test {

/// One fleet-state namespace on one store: the FleetStates made from it
/// are replicas of one fleet.
class FleetStateFleet {
 public:
  virtual ~FleetStateFleet() = default;
  /// A new replica's fleet state.
  virtual std::shared_ptr<FleetState> replica() = 0;
  /// A keep_for short enough to wait out in a test.
  [[nodiscard]] virtual std::chrono::nanoseconds short_keep_for() const = 0;
  /// A replica whose records can live as short as short_keep_for(): the
  /// same as replica() where expiry is per record (memory, Redis); on a
  /// store whose expiry is per bucket (NATS), one on a bucket with that TTL.
  virtual std::shared_ptr<FleetState> replica_for_expiry() { return replica(); }
  /// Lets `duration` pass on the store's clock (memory: the virtual clock
  /// moves; a server: real time passes).
  virtual void let_pass(std::chrono::nanoseconds duration) = 0;
  /// How much longer than `keep_for` after its last write a ledger may
  /// live: zero where each write sets its life (Redis sets it once a
  /// while: redis::FleetState::ledger_life_refresh()).
  [[nodiscard]] virtual std::chrono::nanoseconds ledger_life_beyond(std::chrono::nanoseconds /*keep_for*/) const {
    return {};
  }
};

struct FleetStateBackend {
  std::string name;
  std::function<std::unique_ptr<FleetStateFleet>()> make;
};

inline std::ostream& operator<<(std::ostream& out, const FleetStateBackend& backend) { return out << backend.name; }

class FleetStateContract : public ::testing::TestWithParam<FleetStateBackend> {};

/// An instant on a whole minute, as a cron job's instants are: `n` minutes
/// after a base two days back.
Instant contract_minute(int n);
/// A job key no other test (or earlier run on the same server) uses.
std::string contract_job(std::string_view prefix, std::string_view name);

}  // namespace fleetcron::test
