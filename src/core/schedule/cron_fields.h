// Internal: a parsed cron spec as bit sets, and matching of wall-clock times.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace fleetcron::detail {

/// The fields of a cron spec as bit sets. Bit n set means value n matches.
/// Wall-clock ("local") times are counted in seconds since 1970-01-01T00:00
/// of the zone's calendar, with no offset applied.
struct CronFields {
  std::uint64_t seconds = 0;        ///< bits 0..59
  std::uint64_t minutes = 0;        ///< bits 0..59
  std::uint32_t hours = 0;          ///< bits 0..23
  std::uint32_t days_of_month = 0;  ///< bits 1..31
  std::uint16_t months = 0;         ///< bits 1..12
  std::uint8_t days_of_week = 0;    ///< bits 0..6, 0 = Sunday
  /// The day field's terms include `*` or `?` (so `*/2` counts): Vixie rule.
  bool day_of_month_star = false;
  bool day_of_week_star = false;
  /// The hour field starts with `*` (`*`, `*/2`): periodic for the DST rules.
  bool hour_star = false;
  /// The optional year field (first_year..last_year): bit y - first_year of
  /// years[(y - first_year) / 64]. Without one, every year matches.
  bool any_year = true;
  std::array<std::uint64_t, 3> years{};
  static constexpr int first_year = 1970;
  static constexpr int last_year = 2099;
  /// Derived by finish(): the last year the field matches (last_year
  /// without a year field), where next()'s search may end.
  int last_matching_year = last_year;

  // Quartz day-of-month tokens.
  bool last_day = false;               ///< L
  std::uint32_t days_before_last = 0;  ///< L-n: bit n (1..30)
  bool last_weekday = false;           ///< LW: last Monday–Friday of the month
  std::uint32_t nearest_weekday = 0;   ///< nW: bit n (1..31)
  // Quartz day-of-week tokens.
  std::array<std::uint8_t, 7> nth_of_weekday{};  ///< N#M: bit M (1..5) of [N]
  std::uint8_t last_of_weekday = 0;              ///< NL: bit N

  /// Derived by finish(): the days 1..31 matching days_of_week in a month
  /// whose first day is weekday w (index w, 0 = Sunday).
  std::array<std::uint32_t, 7> weekday_days_by_first{};
  bool has_quartz_days = false;

  static constexpr std::uint32_t all_hours = (1u << 24) - 1;

  /// Computes the derived members; call once after setting the fields.
  void finish() noexcept;

  /// Whether year `y` matches the year field.
  [[nodiscard]] bool year_matches(int y) const noexcept;
  /// The first matching year at or after `y`, or std::nullopt.
  [[nodiscard]] std::optional<int> next_year(int y) const noexcept;

  /// True when the hour field matches every hour or starts with `*` (`*/2`,
  /// as Vixie cron): a periodic spec, which keeps absolute time through DST.
  [[nodiscard]] bool every_hour() const noexcept { return hours == all_hours || hour_star; }
};

/// The days (bits 1..31) of `month` in `year` that match the day fields.
[[nodiscard]] std::uint32_t matching_days(const CronFields& fields, int year, unsigned month) noexcept;

/// The first second of the day at or after `from_s` (0..86399) that matches
/// hour, minute and second, or std::nullopt.
[[nodiscard]] std::optional<std::int32_t> next_time_of_day(const CronFields& fields, std::int32_t from_s) noexcept;

/// The first wall-clock second in [from_s, until_s) that matches, or
/// std::nullopt. Allocation-free; loops at most once per month of the window.
[[nodiscard]] std::optional<std::int64_t> next_local_match(const CronFields& fields, std::int64_t from_s,
                                                           std::int64_t until_s) noexcept;

/// True when the wall-clock second `local_s` matches every field.
[[nodiscard]] bool matches_local(const CronFields& fields, std::int64_t local_s) noexcept;

}  // namespace fleetcron::detail
