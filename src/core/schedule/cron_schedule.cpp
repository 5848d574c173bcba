#include "core/schedule/cron_schedule.h"

#include <algorithm>
#include <chrono>

#include "core/time/zone_rules.h"

namespace fleetcron::detail {
namespace {

using namespace std::chrono;

// More periods than any zone has in the search horizon (real zones have at
// most ~4 a year); reaching it means corrupt rules, and next() answers "none".
constexpr int max_periods_searched = 4 * (CronFields::last_year - CronFields::first_year + 2) + 16;

// The first local second after the search: January 1 of the year after the
// last matching year of a year field, else of the year after the horizon.
std::int64_t horizon_local_s(const CronFields& fields, std::int64_t local_s) {
  auto y = year_month_day{floor<days>(sys_seconds{seconds{local_s}})}.year() + years{search_horizon_years + 1};
  if (!fields.any_year) y = year{fields.last_matching_year + 1};
  return sys_seconds{sys_days{y / January / 1}}.time_since_epoch().count();
}

}  // namespace

CronSchedule::CronSchedule(std::string spec, const CronFields& fields, TimeZone zone, DstPolicy dst)
    : spec_(std::move(spec)), fields_(fields), zone_(zone), dst_(dst) {}

std::optional<Instant> CronSchedule::next(Instant after) const noexcept {
  if (after < min_supported_instant || after >= max_supported_instant) return std::nullopt;
  // Whole seconds, strictly after `after`.
  const std::int64_t from_s = floor<seconds>(after).time_since_epoch().count() + 1;
  std::optional<std::int64_t> found;
  if (zone_.is_utc()) {
    found = next_local_match(fields_, from_s, horizon_local_s(fields_, from_s));
  } else {
    found = next_in_zone(from_s);
  }
  if (!found || Instant{seconds{*found}} >= max_supported_instant) return std::nullopt;
  return Instant{seconds{*found}};
}

// Within one period, local = utc + offset is a bijection, so the first
// wall-clock match in the period's local window is the first instant. The
// policy only trims the windows at the period's edges:
//  - overlap at the start (prev_offset > offset): wall times up to
//    begin + prev_offset were already seen; `first` skips them here;
//  - overlap at the end (next_offset < offset): wall times from
//    end + next_offset come again; `last` leaves them to the next period;
//  - gap at the end (next_offset > offset): wall times in
//    [end + offset, end + next_offset) never occur; `shift` fires at `end`
//    if any of them matches.
// A periodic spec (every hour) keeps both windows whole and never shifts.
std::optional<std::int64_t> CronSchedule::next_in_zone(std::int64_t from_s) const noexcept {
  const ZoneRules& rules = rules_of(zone_);
  const bool policy_applies = !is_periodic();
  // Start in the period holding the second *before* from_s: when from_s is
  // exactly a transition, the gap check of the period that ends there must
  // still run (its shifted fire is at from_s itself). Regression test:
  // DstNewYork.ShiftedFireFromTheLastSecondBeforeTheGap.
  ZonePeriod period = rules.period_at(from_s - 1);
  const std::int64_t horizon_s = horizon_local_s(fields_, from_s + period.offset_s);
  std::int64_t cursor_s = from_s;
  for (int searched = 0; searched < max_periods_searched; ++searched) {
    std::int64_t window_begin = cursor_s + period.offset_s;
    std::int64_t window_end = period.end_s == period_unbounded_end ? horizon_s : period.end_s + period.offset_s;
    if (policy_applies && dst_.overlap == DstOverlap::first && period.prev_offset_s > period.offset_s) {
      window_begin = std::max(window_begin, period.begin_s + period.prev_offset_s);
    }
    if (policy_applies && dst_.overlap == DstOverlap::last && period.next_offset_s < period.offset_s) {
      window_end = std::min(window_end, period.end_s + period.next_offset_s);
    }
    window_end = std::min(window_end, horizon_s);
    if (auto local = next_local_match(fields_, window_begin, window_end)) return *local - period.offset_s;
    if (period.end_s == period_unbounded_end || period.end_s + period.offset_s >= horizon_s) return std::nullopt;
    if (policy_applies && dst_.gap == DstGap::shift && period.next_offset_s > period.offset_s) {
      const std::int64_t gap_begin = period.end_s + period.offset_s;
      const std::int64_t gap_end = std::min(period.end_s + period.next_offset_s, horizon_s);
      if (next_local_match(fields_, gap_begin, gap_end)) return period.end_s;
    }
    cursor_s = period.end_s;
    period = rules.period_after(period);
  }
  return std::nullopt;
}

}  // namespace fleetcron::detail
