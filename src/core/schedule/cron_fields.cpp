#include "core/schedule/cron_fields.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include "core/support/assert.h"

namespace fleetcron::detail {
namespace {

using namespace std::chrono;

constexpr std::int64_t seconds_per_day = 86'400;
// Days 1, 8, 15, 22, 29 as bits 0, 7, 14, 21, 28: shifted left by the first
// matching day it marks every same weekday of a month.
constexpr std::uint32_t every_seventh_day = 0x1020'4081u;

constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

std::int64_t day_number(int y, unsigned m, unsigned d) {
  return sys_days{year{y} / month{m} / day{d}}.time_since_epoch().count();
}

// The smallest set bit of `mask` at or above `from`, or `width` if none.
template <class Mask>
unsigned next_bit(Mask mask, unsigned from, unsigned width) {
  if (from >= width) return width;
  const Mask above = static_cast<Mask>(mask >> from);
  if (above == 0) return width;
  return from + static_cast<unsigned>(std::countr_zero(above));
}

unsigned weekday_of(int y, unsigned m, unsigned d) {
  return weekday{sys_days{year{y} / month{m} / day{d}}}.c_encoding();
}

// Quartz nW: the weekday nearest to day n, never leaving the month.
unsigned nearest_weekday_day(unsigned n, unsigned last, unsigned weekday_of_n) {
  if (weekday_of_n == 6) return n == 1 ? 3 : n - 1;     // Saturday → Friday, or Monday the 3rd
  if (weekday_of_n == 0) return n == last ? n - 2 : n + 1;  // Sunday → Monday, or Friday
  return n;
}

}  // namespace

void CronFields::finish() noexcept {
  for (unsigned first = 0; first < 7; ++first) {
    std::uint32_t days = 0;
    for (unsigned w = 0; w < 7; ++w) {
      if ((days_of_week >> w & 1u) == 0) continue;
      const unsigned first_match = (w + 7 - first) % 7 + 1;  // 1..7
      days |= every_seventh_day << first_match;
    }
    weekday_days_by_first[first] = days;
  }
  has_quartz_days = last_day || days_before_last != 0 || last_weekday || nearest_weekday != 0 ||
                    last_of_weekday != 0;
  for (auto nth : nth_of_weekday) has_quartz_days = has_quartz_days || nth != 0;
  last_matching_year = last_year;
  while (last_matching_year > first_year && !year_matches(last_matching_year)) --last_matching_year;
}

bool CronFields::year_matches(int y) const noexcept {
  if (any_year) return true;
  if (y < first_year || y > last_year) return false;
  const auto bit = static_cast<unsigned>(y - first_year);
  return (years[bit / 64] >> (bit % 64) & 1u) != 0;
}

std::optional<int> CronFields::next_year(int y) const noexcept {
  for (int candidate = std::max(y, first_year); candidate <= last_matching_year; ++candidate) {
    if (year_matches(candidate)) return candidate;
  }
  return std::nullopt;
}

std::uint32_t matching_days(const CronFields& f, int y, unsigned m) noexcept {
  const unsigned last = unsigned(year_month_day_last{year{y} / month{m} / std::chrono::last}.day());
  const std::uint32_t valid = (2u << last) - 2u;  // bits 1..last (2u << 31 wraps to 0 by design)
  const unsigned first_weekday = weekday_of(y, m, 1);
  std::uint32_t by_month_day = f.days_of_month;
  std::uint32_t by_weekday = f.weekday_days_by_first[first_weekday];
  if (f.has_quartz_days) {
    if (f.last_day) by_month_day |= 1u << last;
    for (unsigned n = 1; n < last; ++n) {
      if ((f.days_before_last >> n & 1u) != 0) by_month_day |= 1u << (last - n);
    }
    if (f.last_weekday) {
      const unsigned w = (first_weekday + last - 1) % 7;
      const unsigned back = w == 6 ? 1 : w == 0 ? 2 : 0;
      by_month_day |= 1u << (last - back);
    }
    for (unsigned n = 1; n <= last; ++n) {
      if ((f.nearest_weekday >> n & 1u) == 0) continue;
      by_month_day |= 1u << nearest_weekday_day(n, last, (first_weekday + n - 1) % 7);
    }
    for (unsigned w = 0; w < 7; ++w) {
      const unsigned first_match = (w + 7 - first_weekday) % 7 + 1;
      for (unsigned nth = 1; nth <= 5; ++nth) {
        const unsigned d = first_match + 7 * (nth - 1);
        if ((f.nth_of_weekday[w] >> nth & 1u) != 0 && d <= last) by_weekday |= 1u << d;
      }
      if ((f.last_of_weekday >> w & 1u) != 0) by_weekday |= 1u << (first_match + 7 * ((last - first_match) / 7));
    }
  }
  by_month_day &= valid;
  by_weekday &= valid;
  if (f.day_of_month_star || f.day_of_week_star) return by_month_day & by_weekday;
  return by_month_day | by_weekday;
}

std::optional<std::int32_t> next_time_of_day(const CronFields& f, std::int32_t from_s) noexcept {
  FLEETCRON_ASSERT(from_s >= 0 && from_s < seconds_per_day);
  const auto from_hour = static_cast<unsigned>(from_s / 3600);
  const auto from_minute = static_cast<unsigned>(from_s / 60 % 60);
  const auto from_second = static_cast<unsigned>(from_s % 60);
  for (unsigned h = next_bit(f.hours, from_hour, 24); h < 24; h = next_bit(f.hours, h + 1, 24)) {
    const unsigned minute_start = h == from_hour ? from_minute : 0;
    for (unsigned m = next_bit(f.minutes, minute_start, 60); m < 60; m = next_bit(f.minutes, m + 1, 60)) {
      const unsigned second_start = (h == from_hour && m == from_minute) ? from_second : 0;
      const unsigned s = next_bit(f.seconds, second_start, 60);
      if (s < 60) return static_cast<std::int32_t>(h * 3600 + m * 60 + s);
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> next_local_match(const CronFields& f, std::int64_t from_s,
                                             std::int64_t until_s) noexcept {
  if (from_s >= until_s) return std::nullopt;
  const std::int64_t day_index = floor_div(from_s, seconds_per_day);
  auto time_of_day = static_cast<std::int32_t>(from_s - day_index * seconds_per_day);
  const year_month_day ymd{sys_days{days{day_index}}};
  int y = int(ymd.year());
  auto m = unsigned(ymd.month());
  auto d = unsigned(ymd.day());
  // Each pass covers one month; the window bounds the passes.
  while (true) {
    if (!f.year_matches(y)) {  // skip to January 1 of the next matching year
      const std::optional<int> next = f.next_year(y + 1);
      if (!next || day_number(*next, 1, 1) * seconds_per_day >= until_s) return std::nullopt;
      y = *next;
      m = 1;
      d = 1;
      time_of_day = 0;
    }
    if ((f.months >> m & 1u) != 0) {
      std::uint32_t candidates = matching_days(f, y, m) & (~0u << d);
      while (candidates != 0) {
        const auto candidate = static_cast<unsigned>(std::countr_zero(candidates));
        const auto start = candidate == d ? time_of_day : 0;
        if (auto tod = next_time_of_day(f, start)) {
          const std::int64_t found = day_number(y, m, candidate) * seconds_per_day + *tod;
          if (found >= until_s) return std::nullopt;
          return found;
        }
        candidates &= candidates - 1;
      }
    }
    if (++m == 13) {
      m = 1;
      ++y;
    }
    d = 1;
    time_of_day = 0;
    if (day_number(y, m, 1) * seconds_per_day >= until_s) return std::nullopt;
  }
}

bool matches_local(const CronFields& f, std::int64_t local_s) noexcept {
  const std::int64_t day_index = floor_div(local_s, seconds_per_day);
  const auto tod = static_cast<std::int32_t>(local_s - day_index * seconds_per_day);
  const year_month_day ymd{sys_days{days{day_index}}};
  const auto m = unsigned(ymd.month());
  if (!f.year_matches(int(ymd.year())) || (f.months >> m & 1u) == 0) return false;
  if ((matching_days(f, int(ymd.year()), m) >> unsigned(ymd.day()) & 1u) == 0) return false;
  return next_time_of_day(f, tod) == tod;
}

}  // namespace fleetcron::detail
