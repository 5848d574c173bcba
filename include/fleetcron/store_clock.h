// fleetcron::StoreClock — the fleet's one clock (docs/fleet-state.md,
// "One clock"): every time the fleet state writes or compares across
// replicas (registry beats and expiry, trigger stamps and expiry, the
// catalogue's "last mentioned") is the store's, read as this replica's
// wall clock plus the store's offset, measured in one round trip.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/time.h"

namespace fleetcron {

class FleetState;

/// How often a StoreClock measures the offset again by default.
inline constexpr std::chrono::seconds default_store_clock_refresh{10};

/// One measurement of the store's clock against this replica's.
struct FLEETCRON_API StoreClockReading {
  /// The store's clock minus this replica's (positive: this one is behind).
  std::chrono::microseconds offset{0};
  /// Half the measurement's round trip: the offset is right within this.
  std::chrono::microseconds error{0};
  /// When it was measured, on the local steady clock.
  Clock::SteadyTime measured_at{};
};

/// Thread-safe. The store's time as `clock` plus the last offset measured
/// through FleetState::store_now(), measured again when the last reading
/// is older than `refresh` (1 ms to 1 h). Its error is the reading's
/// `error` plus whatever this replica's clock stepped or drifted since the
/// reading (at most `refresh` ago). A store that cannot tell its time
/// (store_now() answers nullopt), or that was never reached, leaves the
/// local clock uncorrected; a failed measurement keeps the last reading
/// and is tried again a second later at the earliest.
class FLEETCRON_API StoreClock {
 public:
  /// `state` must outlive this clock. Throws std::invalid_argument for a
  /// null clock or a refresh out of range.
  StoreClock(FleetState& state, std::shared_ptr<Clock> clock,
             std::chrono::nanoseconds refresh = default_store_clock_refresh);
  ~StoreClock();
  StoreClock(const StoreClock&) = delete;
  StoreClock& operator=(const StoreClock&) = delete;

  /// The store's clock now, as well as it is known (see the class).
  [[nodiscard]] Instant now();
  /// The last successful measurement, if any (measures none).
  [[nodiscard]] std::optional<StoreClockReading> reading() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron
