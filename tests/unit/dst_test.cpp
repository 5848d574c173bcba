// Daylight saving: the gap and overlap policies in four kinds of zone, and
// periodic specs keeping their rhythm.
#include <gtest/gtest.h>

#include "test_util.h"

namespace fleetcron {
namespace {

using test::fires;
using test::in_zone;
using Strings = std::vector<std::string>;

constexpr DstPolicy shift_first{DstGap::shift, DstOverlap::first};
constexpr DstPolicy skip_first{DstGap::skip, DstOverlap::first};
constexpr DstPolicy shift_last{DstGap::shift, DstOverlap::last};
constexpr DstPolicy shift_both{DstGap::shift, DstOverlap::both};

// New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT.
TEST(DstNewYork, GapShiftFiresOnceAtTheEndOfTheGap) {
  const auto ny = in_zone("America/New_York", shift_first);
  EXPECT_EQ(fires("30 2 * * *", "2026-03-07T12:00:00Z", 2, ny),
            (Strings{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}));
  // Several gap times, and 03:00 itself: one fire.
  EXPECT_EQ(fires("0,30 2,3 * * *", "2026-03-07T12:00:00Z", 3, ny),
            (Strings{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-09T02:00:00-04:00"}));
  EXPECT_EQ(fires("0 3 * * *", "2026-03-07T12:00:00Z", 1, ny), Strings{"2026-03-08T03:00:00-04:00"});
}

// Vixie cron: an hour field that starts with '*' (`*/2`) is a wildcard for
// the DST rules, so the schedule keeps absolute time: 02:00 does not exist
// that night and nothing is shifted to 03:00 (review finding).
TEST(DstNewYork, AnHourFieldStartingWithAStarKeepsAbsoluteTime) {
  const auto ny = in_zone("America/New_York", shift_first);
  EXPECT_EQ(fires("0 */2 * * *", "2026-03-08T04:30:00Z", 3, ny),
            (Strings{"2026-03-08T00:00:00-05:00", "2026-03-08T04:00:00-04:00", "2026-03-08T06:00:00-04:00"}));
  // Not starting with '*': restricted, the gap shifts as before.
  EXPECT_EQ(fires("0 0-23/2 * * *", "2026-03-08T04:30:00Z", 3, ny),
            (Strings{"2026-03-08T00:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}));
}

// Regression (review): from the last second before the jump, from_s is the
// transition itself and the shifted fire was lost.
TEST(DstNewYork, ShiftedFireFromTheLastSecondBeforeTheGap) {
  const auto ny = in_zone("America/New_York", shift_first);
  EXPECT_EQ(fires("30 2 * * *", "2026-03-08T06:59:59Z", 1, ny), Strings{"2026-03-08T03:00:00-04:00"});
  EXPECT_EQ(fires("30 2 * * *", "2026-03-08T06:59:59.5Z", 1, ny), Strings{"2026-03-08T03:00:00-04:00"});
  EXPECT_EQ(fires("30 2 * * *", "2026-03-08T07:00:00Z", 1, ny), Strings{"2026-03-09T02:30:00-04:00"});
  EXPECT_EQ(fires("15 2 * * *", "2026-10-03T15:29:59Z", 1, in_zone("Australia/Lord_Howe", shift_first)),
            Strings{"2026-10-04T02:30:00+11:00"});
}

TEST(DstNewYork, GapSkipDropsTheDay) {
  const auto ny = in_zone("America/New_York", skip_first);
  EXPECT_EQ(fires("30 2 * * *", "2026-03-07T12:00:00Z", 2, ny),
            (Strings{"2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}));
  EXPECT_EQ(fires("0,30 2,3 * * *", "2026-03-07T12:00:00Z", 2, ny),
            (Strings{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}));
}

TEST(DstNewYork, PeriodicSpecsKeepTheirRhythmThroughTheGap) {
  for (DstPolicy policy : {shift_first, skip_first}) {
    const auto ny = in_zone("America/New_York", policy);
    EXPECT_EQ(fires("*/30 * * * *", "2026-03-08T01:00:00-05:00", 3, ny),
              (Strings{"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}));
    // Hourly at :30 has no 02:30 that day; nothing is shifted.
    EXPECT_EQ(fires("30 * * * *", "2026-03-08T01:00:00-05:00", 2, ny),
              (Strings{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"}));
  }
}

// New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST.
TEST(DstNewYork, OverlapFirstLastBoth) {
  EXPECT_EQ(fires("30 1 * * *", "2026-10-31T12:00:00Z", 2, in_zone("America/New_York", shift_first)),
            (Strings{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}));
  EXPECT_EQ(fires("30 1 * * *", "2026-10-31T12:00:00Z", 2, in_zone("America/New_York", shift_last)),
            (Strings{"2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"}));
  EXPECT_EQ(fires("30 1 * * *", "2026-10-31T12:00:00Z", 3, in_zone("America/New_York", shift_both)),
            (Strings{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"}));
  EXPECT_EQ(fires("0 1,2 * * *", "2026-10-31T12:00:00Z", 2, in_zone("America/New_York", shift_last)),
            (Strings{"2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}));
}

TEST(DstNewYork, OverlapPoliciesFromInsideTheOverlap) {
  const auto first = in_zone("America/New_York", shift_first);
  const auto last = in_zone("America/New_York", shift_last);
  const auto both = in_zone("America/New_York", shift_both);
  // After the first 01:30.
  EXPECT_EQ(fires("30 1 * * *", "2026-11-01T01:40:00-04:00", 1, first), Strings{"2026-11-02T01:30:00-05:00"});
  EXPECT_EQ(fires("30 1 * * *", "2026-11-01T01:40:00-04:00", 1, both), Strings{"2026-11-01T01:30:00-05:00"});
  // Before the first 01:30, within the repeated hour.
  EXPECT_EQ(fires("30 1 * * *", "2026-11-01T01:10:00-04:00", 1, last), Strings{"2026-11-01T01:30:00-05:00"});
  // In the second pass of the hour, before 01:30 EST.
  EXPECT_EQ(fires("30 1 * * *", "2026-11-01T01:10:00-05:00", 1, first), Strings{"2026-11-02T01:30:00-05:00"});
  EXPECT_EQ(fires("30 1 * * *", "2026-11-01T01:10:00-05:00", 1, last), Strings{"2026-11-01T01:30:00-05:00"});
}

TEST(DstNewYork, PeriodicSpecsFireOnEveryAbsoluteMatchInTheOverlap) {
  for (DstPolicy policy : {shift_first, shift_last}) {
    const auto ny = in_zone("America/New_York", policy);
    EXPECT_EQ(fires("*/30 * * * *", "2026-11-01T00:45:00-04:00", 5, ny),
              (Strings{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00",
                       "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}));
    EXPECT_EQ(fires("0 * * * *", "2026-11-01T00:30:00-04:00", 3, ny),
              (Strings{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}));
  }
}

// Berlin, 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET.
TEST(DstBerlin, GapAndOverlap) {
  EXPECT_EQ(fires("30 2 * * *", "2026-03-28T12:00:00Z", 1, in_zone("Europe/Berlin", shift_first)),
            Strings{"2026-03-29T03:00:00+02:00"});
  EXPECT_EQ(fires("30 2 * * *", "2026-03-28T12:00:00Z", 1, in_zone("Europe/Berlin", skip_first)),
            Strings{"2026-03-30T02:30:00+02:00"});
  EXPECT_EQ(fires("30 2 * * *", "2026-10-24T12:00:00Z", 2, in_zone("Europe/Berlin", shift_first)),
            (Strings{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}));
  EXPECT_EQ(fires("30 2 * * *", "2026-10-24T12:00:00Z", 1, in_zone("Europe/Berlin", shift_last)),
            Strings{"2026-10-25T02:30:00+01:00"});
  EXPECT_EQ(fires("30 2 * * *", "2026-10-24T12:00:00Z", 2, in_zone("Europe/Berlin", shift_both)),
            (Strings{"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"}));
  EXPECT_EQ(fires("*/20 * * * *", "2026-03-29T01:30:00+01:00", 3, in_zone("Europe/Berlin", shift_first)),
            (Strings{"2026-03-29T01:40:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:20:00+02:00"}));
}

// Lord Howe moves by 30 minutes: 2026-10-04 02:00 → 02:30 (+10:30 → +11),
// 2026-04-05 02:00 → 01:30 (+11 → +10:30).
TEST(DstLordHowe, ThirtyMinuteGap) {
  EXPECT_EQ(fires("15 2 * * *", "2026-10-03T12:00:00Z", 2, in_zone("Australia/Lord_Howe", shift_first)),
            (Strings{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}));
  EXPECT_EQ(fires("15 2 * * *", "2026-10-03T12:00:00Z", 1, in_zone("Australia/Lord_Howe", skip_first)),
            Strings{"2026-10-05T02:15:00+11:00"});
  EXPECT_EQ(fires("45 2 * * *", "2026-10-03T12:00:00Z", 1, in_zone("Australia/Lord_Howe", skip_first)),
            Strings{"2026-10-04T02:45:00+11:00"});
  EXPECT_EQ(fires("*/15 * * * *", "2026-10-04T01:30:00+10:30", 3, in_zone("Australia/Lord_Howe")),
            (Strings{"2026-10-04T01:45:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"}));
}

TEST(DstLordHowe, ThirtyMinuteOverlap) {
  EXPECT_EQ(fires("45 1 * * *", "2026-04-04T12:00:00Z", 1, in_zone("Australia/Lord_Howe", shift_first)),
            Strings{"2026-04-05T01:45:00+11:00"});
  EXPECT_EQ(fires("45 1 * * *", "2026-04-04T12:00:00Z", 1, in_zone("Australia/Lord_Howe", shift_last)),
            Strings{"2026-04-05T01:45:00+10:30"});
  EXPECT_EQ(fires("45 1 * * *", "2026-04-04T12:00:00Z", 2, in_zone("Australia/Lord_Howe", shift_both)),
            (Strings{"2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30"}));
  EXPECT_EQ(fires("*/15 * * * *", "2026-04-05T01:20:00+11:00", 5, in_zone("Australia/Lord_Howe")),
            (Strings{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30",
                     "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}));
}

TEST(DstKolkata, NoDaylightSavingMeansPoliciesNeverMatter) {
  for (DstPolicy policy : {shift_first, skip_first, shift_last, shift_both}) {
    EXPECT_EQ(fires("30 2 * * *", "2026-03-07T12:00:00Z", 2, in_zone("Asia/Kolkata", policy)),
              (Strings{"2026-03-08T02:30:00+05:30", "2026-03-09T02:30:00+05:30"}));
  }
}

TEST(DstBeyond2037, FollowsTheZoneRule) {
  // date's OS tzdb stops at 2037; the footer rule continues it. 2040:
  // DST from March 11 (second Sunday) to November 4 (first Sunday).
  EXPECT_EQ(fires("30 2 * * *", "2040-03-10T12:00:00Z", 2, in_zone("America/New_York")),
            (Strings{"2040-03-11T03:00:00-04:00", "2040-03-12T02:30:00-04:00"}));
  EXPECT_EQ(fires("0 12 4,5 11 *", "2040-11-01T00:00:00Z", 2, in_zone("America/New_York")),
            (Strings{"2040-11-04T12:00:00-05:00", "2040-11-05T12:00:00-05:00"}));
  EXPECT_EQ(fires("0 12 1 7 *", "2150-01-01T00:00:00Z", 1, in_zone("Europe/Berlin")),
            Strings{"2150-07-01T12:00:00+02:00"});
  EXPECT_EQ(fires("0 12 1 1 *", "2150-01-01T00:00:00Z", 1, in_zone("Australia/Lord_Howe")),
            Strings{"2150-01-01T12:00:00+11:00"});
}

}  // namespace
}  // namespace fleetcron
