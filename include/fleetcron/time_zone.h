// fleetcron — IANA time zones for schedule calculations.
#pragma once

#include <chrono>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

class TimeZone;

namespace detail {
class ZoneRules;
/// Internal: the loaded rules of a zone (for fleetcron's own sources).
[[nodiscard]] const ZoneRules& rules_of(const TimeZone& zone) noexcept;
}  // namespace detail

/// A handle to an IANA time zone (from the system tzdata in
/// /usr/share/zoneinfo). Cheap to copy; the zone's rules are loaded once per
/// process, on the first locate() of its name, and are immutable afterwards,
/// so every query is lock-free, allocation-free and safe from any thread.
///
/// Limit: tzdata changes take effect on the next process start.
class FLEETCRON_API TimeZone {
 public:
  /// UTC (also what "UTC" and "Etc/UTC" locate to).
  [[nodiscard]] static TimeZone utc() noexcept;

  /// Finds a zone by IANA name, e.g. "America/New_York".
  /// Throws std::invalid_argument `unknown time zone "NAME"` when the name is
  /// empty, longer than 255 bytes, or not in the system tzdata.
  [[nodiscard]] static TimeZone locate(std::string_view name);

  /// The IANA name as given to locate(), or "UTC".
  [[nodiscard]] std::string_view name() const noexcept;

  /// True for UTC (the fast path: no offsets, no transitions).
  [[nodiscard]] bool is_utc() const noexcept;

  /// The zone's UTC offset in effect at `at` (local = at + offset).
  [[nodiscard]] std::chrono::seconds offset_at(Instant at) const noexcept;

  friend bool operator==(const TimeZone& a, const TimeZone& b) noexcept { return a.rules_ == b.rules_; }

 private:
  friend const detail::ZoneRules& detail::rules_of(const TimeZone& zone) noexcept;
  explicit TimeZone(const detail::ZoneRules* rules) noexcept : rules_(rules) {}
  const detail::ZoneRules* rules_;
};

}  // namespace fleetcron
