// For backend authors: the clock-skew guard every Claimer applies
// (docs/coordination.md, "Clock skew"), written once for Redis, NATS and
// PostgreSQL. A claim is refused while this replica's clock is more than
// max_clock_skew from the store's, and a fire scheduled before a store
// reset + max_clock_skew is refused as a store reset; the guard holds the
// bound, the latest measured offset and the refusals' wording. The
// measuring itself (a TIME, a write's timestamp, a statement's now()) is
// the backend's.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/time.h"

namespace fleetcron::backend {

/// Thread-safe.
class FLEETCRON_API ClockSkewGuard {
 public:
  /// `options_name` ("redis::ClaimerOptions") prefixes the option errors;
  /// `ttl_name` ("claim_ttl", "the bucket TTL") names the claim TTL there;
  /// `store` ("Redis server") names the store in refusals. max_clock_skew
  /// defaults to claim_ttl / 4. Throws std::invalid_argument naming the
  /// option and its value unless max_clock_skew is positive and below
  /// claim_ttl / 2 (else two replicas at opposite ends of the guard could
  /// both claim a fire) and skew_refresh_interval is within 1 ms .. 1 h.
  ClockSkewGuard(std::string_view options_name, std::string_view ttl_name, std::string store,
                 std::chrono::nanoseconds claim_ttl, std::optional<std::chrono::nanoseconds> max_clock_skew,
                 std::chrono::nanoseconds skew_refresh_interval, std::shared_ptr<Clock> clock);
  ~ClockSkewGuard();
  ClockSkewGuard(const ClockSkewGuard&) = delete;
  ClockSkewGuard& operator=(const ClockSkewGuard&) = delete;

  [[nodiscard]] std::chrono::nanoseconds max_clock_skew() const noexcept;
  /// claim_ttl − 2 × max_clock_skew: how long after its instant a fire is
  /// still refused as taken by every replica the guard admits.
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const noexcept;

  /// Whether `offset` (store time minus local time) is beyond the bound.
  [[nodiscard]] bool beyond(std::chrono::microseconds offset) const noexcept;
  /// "local clock is 3s behind the Redis server's, beyond max_clock_skew 2m30s".
  [[nodiscard]] std::string skew_refusal(std::chrono::microseconds offset) const;
  /// Whether a fire scheduled at `scheduled` comes before `reset` + max_clock_skew.
  [[nodiscard]] bool before_reset(Instant scheduled, Instant reset) const noexcept;
  /// "scheduled before RESET_NAME RESET + max_clock_skew S: WHY; not claimed again".
  [[nodiscard]] std::string reset_refusal(std::string_view reset_name, Instant reset, std::string_view why) const;
  /// reset_refusal() for a store that keeps the instant of its last reset
  /// (Redis's and PostgreSQL's claim epoch).
  [[nodiscard]] std::string epoch_refusal(Instant epoch) const;

  /// Keeps `offset`, measured at `measured_at` (local steady clock), unless
  /// a later measurement is kept already.
  void remember(std::chrono::microseconds offset, Clock::SteadyTime measured_at);
  /// The latest measurement, if any.
  [[nodiscard]] std::optional<ClockOffset> last_offset() const;
  /// The latest measurement if younger than skew_refresh_interval; nullopt
  /// when it is time to measure again.
  [[nodiscard]] std::optional<ClockOffset> fresh_offset() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::backend
