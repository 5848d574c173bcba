// The bit-set matcher underneath next(): time-of-day search and month masks.
#include <gtest/gtest.h>

#include "core/schedule/cron_fields.h"

namespace fleetcron::detail {
namespace {

CronFields every_second_of(std::uint32_t hours, std::uint64_t minutes, std::uint64_t seconds) {
  CronFields f;
  f.hours = hours;
  f.minutes = minutes;
  f.seconds = seconds;
  f.days_of_month = 0xFFFF'FFFEu;
  f.months = 0x1FFE;
  f.days_of_week = 0x7F;
  f.day_of_month_star = f.day_of_week_star = true;
  f.finish();
  return f;
}

TEST(NextTimeOfDay, CarriesSecondsIntoMinutesIntoHours) {
  const auto f = every_second_of(1u << 5 | 1u << 7, std::uint64_t{1} << 10 | std::uint64_t{1} << 20, 1);
  EXPECT_EQ(next_time_of_day(f, 0), 5 * 3600 + 10 * 60);
  EXPECT_EQ(next_time_of_day(f, 5 * 3600 + 10 * 60), 5 * 3600 + 10 * 60);
  EXPECT_EQ(next_time_of_day(f, 5 * 3600 + 10 * 60 + 1), 5 * 3600 + 20 * 60);
  EXPECT_EQ(next_time_of_day(f, 5 * 3600 + 20 * 60 + 1), 7 * 3600 + 10 * 60);
  EXPECT_EQ(next_time_of_day(f, 7 * 3600 + 20 * 60 + 1), std::nullopt);
}

TEST(MatchingDays, StarDaysCoverTheMonthExactly) {
  const auto f = every_second_of(1, 1, 1);
  EXPECT_EQ(matching_days(f, 2026, 2), 0x1FFF'FFFEu);  // 28 days
  EXPECT_EQ(matching_days(f, 2028, 2), 0x3FFF'FFFEu);  // 29 days
  EXPECT_EQ(matching_days(f, 2026, 1), 0xFFFF'FFFEu);  // 31 days
  EXPECT_EQ(matching_days(f, 2026, 4), 0x7FFF'FFFEu);  // 30 days
}

TEST(MatchingDays, WeekdaysFollowTheFirstOfTheMonth) {
  auto f = every_second_of(1, 1, 1);
  f.days_of_week = 1u << 1;  // Mondays
  f.day_of_week_star = false;
  f.finish();
  // June 2026 starts on a Monday: 1, 8, 15, 22, 29.
  EXPECT_EQ(matching_days(f, 2026, 6), 1u << 1 | 1u << 8 | 1u << 15 | 1u << 22 | 1u << 29);
}

TEST(MatchesLocal, AgreesWithTheFields) {
  const auto f = every_second_of(1u << 12, std::uint64_t{1} << 30, 1);
  const std::int64_t noon_thirty = 20'000LL * 86'400 + 12 * 3600 + 30 * 60;
  EXPECT_TRUE(matches_local(f, noon_thirty));
  EXPECT_FALSE(matches_local(f, noon_thirty + 1));
  EXPECT_EQ(next_local_match(f, noon_thirty + 1, noon_thirty + 86'400), std::nullopt);
  EXPECT_EQ(next_local_match(f, noon_thirty + 1, noon_thirty + 86'401), noon_thirty + 86'400);
}

}  // namespace
}  // namespace fleetcron::detail
