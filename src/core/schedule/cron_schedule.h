// Internal: the Schedule of a parsed cron spec.
#pragma once

#include <optional>
#include <string>

#include "core/schedule/cron_fields.h"
#include "fleetcron/cron.h"
#include "fleetcron/schedule.h"

namespace fleetcron::detail {

/// A cron spec in a zone with a DST policy. next() maps wall-clock matches
/// to instants period by period (a period is a span with one UTC offset);
/// see docs/time-engine.md for the rules at the transitions.
class CronSchedule final : public Schedule {
 public:
  CronSchedule(std::string spec, const CronFields& fields, TimeZone zone, DstPolicy dst);

  [[nodiscard]] std::optional<Instant> next(Instant after) const noexcept override;
  [[nodiscard]] TimeZone zone() const noexcept override { return zone_; }
  [[nodiscard]] std::string_view spec() const noexcept override { return spec_; }

  [[nodiscard]] const CronFields& fields() const noexcept { return fields_; }
  [[nodiscard]] DstPolicy dst_policy() const noexcept { return dst_; }
  /// The hour field matches every hour: the DST policy does not apply.
  [[nodiscard]] bool is_periodic() const noexcept { return fields_.every_hour(); }

 private:
  [[nodiscard]] std::optional<std::int64_t> next_in_zone(std::int64_t from_s) const noexcept;

  std::string spec_;
  CronFields fields_;
  TimeZone zone_;
  DstPolicy dst_;
};

/// How many calendar years past the year of `after` next() searches.
/// 50: every instant a spec can have is found — 29 February on a given
/// weekday recurs at most 40 years apart across 2100 (not a leap year),
/// 29 February alone 8 (2096, 2104).
inline constexpr int search_horizon_years = 50;

}  // namespace fleetcron::detail
