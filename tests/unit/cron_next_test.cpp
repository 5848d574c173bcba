// next() on UTC: the calendar rules, the day rule, Quartz days, the horizon.
#include <gtest/gtest.h>

#include "test_util.h"

namespace fleetcron {
namespace {

using test::at;
using test::fires;
using Strings = std::vector<std::string>;

TEST(CronNext, IsStrictlyAfterAndWholeSeconds) {
  EXPECT_EQ(fires("* * * * *", "2026-06-15T12:34:00Z", 1), Strings{"2026-06-15T12:35:00Z"});
  EXPECT_EQ(fires("* * * * *", "2026-06-15T12:34:59.999Z", 1), Strings{"2026-06-15T12:35:00Z"});
  EXPECT_EQ(fires("* * * * * *", "2026-06-15T12:34:56.5Z", 2, test::with_seconds(SecondsField::optional)),
            (Strings{"2026-06-15T12:34:57Z", "2026-06-15T12:34:58Z"}));
}

TEST(CronNext, CarriesAcrossEveryUnit) {
  EXPECT_EQ(fires("0 0 * * *", "2026-12-31T23:59:59Z", 1), Strings{"2027-01-01T00:00:00Z"});
  EXPECT_EQ(fires("15,45 14 * * *", "2026-06-15T12:34:56Z", 3),
            (Strings{"2026-06-15T14:15:00Z", "2026-06-15T14:45:00Z", "2026-06-16T14:15:00Z"}));
  EXPECT_EQ(fires("0 0 1 1 *", "2026-06-15T12:34:56Z", 2), (Strings{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}));
  EXPECT_EQ(fires("30 59 23 31 12 *", "2026-06-15T12:34:56Z", 1, test::with_seconds(SecondsField::required)),
            Strings{"2026-12-31T23:59:30Z"});
}

TEST(CronNext, Steps) {
  EXPECT_EQ(fires("*/20 * * * *", "2026-06-15T12:34:56Z", 3),
            (Strings{"2026-06-15T12:40:00Z", "2026-06-15T13:00:00Z", "2026-06-15T13:20:00Z"}));
  EXPECT_EQ(fires("50/5 * * * *", "2026-06-15T12:34:56Z", 3),
            (Strings{"2026-06-15T12:50:00Z", "2026-06-15T12:55:00Z", "2026-06-15T13:50:00Z"}));
}

TEST(CronNext, DayRuleIsOrWhenBothDayFieldsAreRestricted) {
  // 2026-01-05 is the first Monday; the 1st is a Thursday.
  EXPECT_EQ(fires("0 0 1 * 1", "2026-01-01T00:00:00Z", 3),
            (Strings{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z"}));
}

TEST(CronNext, DayRuleIsAndWhenEitherDayFieldStartsWithStar) {
  // Odd days that are Mondays: Jan 5 and 19 2026 (12 and 26 are even).
  EXPECT_EQ(fires("0 0 */2 * 1", "2026-01-01T00:00:00Z", 2), (Strings{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z"}));
  EXPECT_EQ(fires("0 0 1 * ?", "2026-01-02T00:00:00Z", 1), Strings{"2026-02-01T00:00:00Z"});
  EXPECT_EQ(fires("0 0 ? * mon", "2026-01-01T00:00:00Z", 1), Strings{"2026-01-05T00:00:00Z"});
}

TEST(CronNext, MonthAndWeekdayNames) {
  EXPECT_EQ(fires("0 9 * feb mon-fri", "2026-01-01T00:00:00Z", 2),
            (Strings{"2026-02-02T09:00:00Z", "2026-02-03T09:00:00Z"}));
  EXPECT_EQ(fires("0 0 * * 7", "2026-01-01T00:00:00Z", 1), Strings{"2026-01-04T00:00:00Z"});
}

TEST(CronNext, QuartzLastDays) {
  EXPECT_EQ(fires("0 0 L * *", "2026-01-01T00:00:00Z", 3),
            (Strings{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"}));
  EXPECT_EQ(fires("0 0 L 2 *", "2027-06-01T00:00:00Z", 1), Strings{"2028-02-29T00:00:00Z"});
  EXPECT_EQ(fires("0 0 L-3 * *", "2026-01-01T00:00:00Z", 2), (Strings{"2026-01-28T00:00:00Z", "2026-02-25T00:00:00Z"}));
  // Jan 31 2026 is a Saturday, Feb 28 too, May 31 a Sunday.
  EXPECT_EQ(fires("0 0 LW * *", "2026-01-01T00:00:00Z", 2), (Strings{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z"}));
  EXPECT_EQ(fires("0 0 LW 5 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-05-29T00:00:00Z"});
}

TEST(CronNext, QuartzNearestWeekday) {
  EXPECT_EQ(fires("0 0 15W 2 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-02-16T00:00:00Z"});   // Sun → Mon
  EXPECT_EQ(fires("0 0 31W 1 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-01-30T00:00:00Z"});   // Sat → Fri
  EXPECT_EQ(fires("0 0 1W 8 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-08-03T00:00:00Z"});    // Sat 1st → Mon 3rd
  EXPECT_EQ(fires("0 0 31W 5 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-05-29T00:00:00Z"});   // Sun 31st → Fri 29th
  EXPECT_EQ(fires("0 0 16W 6 *", "2026-01-01T00:00:00Z", 1), Strings{"2026-06-16T00:00:00Z"});   // a Tuesday stays
  // February and April have no 31st: no match at all.
  EXPECT_EQ(parse_schedule("0 0 31W 2,4 *")->next(at("2026-01-01T00:00:00Z")), std::nullopt);
}

TEST(CronNext, QuartzNthAndLastWeekday) {
  EXPECT_EQ(fires("0 0 ? * FRI#3", "2026-01-01T00:00:00Z", 2), (Strings{"2026-01-16T00:00:00Z", "2026-02-20T00:00:00Z"}));
  EXPECT_EQ(fires("0 0 ? * 5L", "2026-01-01T00:00:00Z", 2), (Strings{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z"}));
  // A fifth Monday: March 2026 (Mondays 2, 9, 16, 23, 30), then June.
  EXPECT_EQ(fires("0 0 ? * mon#5", "2026-01-01T00:00:00Z", 2), (Strings{"2026-03-30T00:00:00Z", "2026-06-29T00:00:00Z"}));
  // Both restricted: the 1st or the last Sunday.
  EXPECT_EQ(fires("0 0 1 * sunL", "2026-01-01T00:00:00Z", 3),
            (Strings{"2026-01-25T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-22T00:00:00Z"}));
}

TEST(CronNext, LeapDaysAndTheHorizonFindEveryInstantASpecCanHave) {
  EXPECT_EQ(fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 2), (Strings{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}));
  const auto never = parse_schedule("0 0 30 2 *");
  EXPECT_EQ(never->next(at("2026-01-01T00:00:00Z")), std::nullopt);
  // Review: 2100 is no leap year, so from 2096-03-01 the next 29 February
  // is 2104's; and 29 February on a Sunday (a `*` day-of-week field with a
  // step: both day fields must match) from 2026 is 2032's. A five-year
  // horizon answered "none" to both.
  EXPECT_EQ(parse_schedule("0 0 29 2 *")->next(at("2096-03-01T00:00:00Z")), at("2104-02-29T00:00:00Z"));
  EXPECT_EQ(parse_schedule("0 0 29 2 */7")->next(at("2026-01-01T00:00:00Z")), at("2032-02-29T00:00:00Z"));
  const auto fifth_monday_feb = parse_schedule("0 0 ? 2 1#5");
  EXPECT_EQ(fifth_monday_feb->next(at("2040-01-01T00:00:00Z")), at("2044-02-29T00:00:00Z"));
  EXPECT_EQ(fifth_monday_feb->next(at("2038-01-01T00:00:00Z")), at("2044-02-29T00:00:00Z"));
  EXPECT_EQ(fifth_monday_feb->next(at("2044-03-01T00:00:00Z")), at("2072-02-29T00:00:00Z"));
}

TEST(CronNext, OutsideTheSupportedRangeIsNone) {
  const auto schedule = parse_schedule("* * * * *");
  EXPECT_EQ(schedule->next(max_supported_instant), std::nullopt);
  EXPECT_EQ(schedule->next(min_supported_instant - std::chrono::seconds{1}), std::nullopt);
  EXPECT_EQ(schedule->next(min_supported_instant), min_supported_instant + std::chrono::minutes{1});
  EXPECT_EQ(parse_schedule("59 23 31 12 *")->next(at("2199-12-31T23:58:00Z")), at("2199-12-31T23:59:00Z"));
}

// Regression (review): the 5-year horizon reached past 2200.
TEST(CronNext, NeverReturnsAnInstantPastTheSupportedRange) {
  EXPECT_EQ(parse_schedule("0 0 1 1 *")->next(at("2199-06-01T00:00:00Z")), std::nullopt);
  EXPECT_EQ(parse_schedule("0 0 29 2 *")->next(at("2199-03-01T00:00:00Z")), std::nullopt);
  EXPECT_EQ(parse_schedule("0 0 1 1 *", test::in_zone("America/New_York"))->next(at("2199-06-01T00:00:00Z")),
            std::nullopt);
}

TEST(CronNext, ChainsStrictlyIncreasing) {
  const auto schedule = parse_schedule("*/7 1-3 * * *");
  Instant cursor = at("2026-01-01T00:00:00Z");
  for (int i = 0; i < 500; ++i) {
    const auto next = schedule->next(cursor);
    ASSERT_TRUE(next);
    ASSERT_GT(*next, cursor);
    cursor = *next;
  }
}

}  // namespace
}  // namespace fleetcron
