// fleetcron — what a user of a lease elector (Redis's, PostgreSQL's: the
// lease kept in a store) sets and sees. The elector itself, for backend
// authors, is backend/lease_elector.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"

namespace fleetcron {

struct FLEETCRON_API LeaseElectorOptions {
  /// The lease; at least 1 ms.
  std::chrono::nanoseconds lease_ttl = std::chrono::seconds{30};
  /// Renew in a background thread every lease_ttl / 3 (and campaign while a
  /// follower), so leadership stays put between sparse fires and is_leader()
  /// answers from memory. Off: is_leader() does the round trip, as
  /// libtnb/cron does, and no thread runs.
  bool keep_alive = false;
  /// With keep_alive, how often a follower campaigns. At least 1 ms.
  std::chrono::nanoseconds follower_poll_interval = std::chrono::milliseconds{500};
  /// A leader that has not renewed for lease_ttl - renew_margin on its
  /// steady clock considers itself a follower, even when the store is
  /// unreachable. nullopt: lease_ttl / 5. 0 <= renew_margin < lease_ttl.
  std::optional<std::chrono::nanoseconds> renew_margin;
  /// The steady clock for the deadline and keep-alive waits. Default: the
  /// system clock.
  std::shared_ptr<Clock> clock;
};

/// What an elector knows, for metrics and `fleetcron status`.
struct FLEETCRON_API ElectorState {
  bool leader = false;
  std::uint64_t term = 0;                        // the term led (or last led); 0 if never
  std::optional<Clock::SteadyTime> valid_until;  // local renew deadline while leading
  std::string last_error;                        // the last failed round trip's error, if the last one failed
};

}  // namespace fleetcron
