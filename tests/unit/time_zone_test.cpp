#include "fleetcron/time_zone.h"

#include <date/tz.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/time/zone_rules.h"
#include "fleetcron/cron.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {
namespace {

using namespace std::chrono;

TEST(TimeZone, LocatesAndNames) {
  EXPECT_EQ(TimeZone::locate("America/New_York").name(), "America/New_York");
  EXPECT_TRUE(TimeZone::utc().is_utc());
  EXPECT_TRUE(TimeZone::locate("Etc/UTC").is_utc());
  EXPECT_FALSE(TimeZone::locate("Europe/London").is_utc());
  EXPECT_EQ(TimeZone::locate("Europe/Berlin"), TimeZone::locate("Europe/Berlin"));
}

TEST(TimeZone, RejectsUnknownNames) {
  for (const char* name : {"", "Mars/Olympus", "../../etc/passwd", "america/new_york"}) {
    EXPECT_THROW((void)TimeZone::locate(name), std::invalid_argument) << name;
  }
  EXPECT_THROW((void)TimeZone::locate(std::string(300, 'A')), std::invalid_argument);
}

// Our period table must agree with the date library everywhere it has data.
TEST(ZoneRules, AgreesWithDateUntil2037) {
  std::mt19937_64 rng(7);
  for (const char* name : {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
                           "America/Sao_Paulo", "Africa/Casablanca", "Pacific/Chatham"}) {
    const auto* rules = detail::ZoneRules::find(name);
    ASSERT_NE(rules, nullptr);
    const auto* zone = date::locate_zone(name);
    std::uniform_int_distribution<std::int64_t> when(sys_seconds{sys_days{1900y / 1 / 1}}.time_since_epoch().count(),
                                                     sys_seconds{sys_days{2037y / 1 / 1}}.time_since_epoch().count());
    for (int i = 0; i < 20'000; ++i) {
      const std::int64_t t = when(rng);
      ASSERT_EQ(rules->period_at(t).offset_s, zone->get_info(sys_seconds{seconds{t}}).offset.count())
          << name << " at " << t;
    }
  }
}

TEST(ZoneRules, PosixRuleTransitions) {
  const auto t = detail::posix_rule_transitions("EST5EDT,M3.2.0,M11.1.0", 2040, 2040);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(format_rfc3339(Instant{seconds{t[0].at_s}}), "2040-03-11T07:00:00Z");
  EXPECT_EQ(t[0].offset_s, -4 * 3600);
  EXPECT_EQ(format_rfc3339(Instant{seconds{t[1].at_s}}), "2040-11-04T06:00:00Z");
  EXPECT_EQ(t[1].offset_s, -5 * 3600);
  // Southern hemisphere, 30-minute DST, explicit DST offset.
  const auto lh = detail::posix_rule_transitions("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", 2040, 2040);
  ASSERT_EQ(lh.size(), 2u);
  EXPECT_EQ(format_rfc3339(Instant{seconds{lh[0].at_s}}), "2040-03-31T15:00:00Z");  // Sun 1 April 02:00 +11 → 01:30
  EXPECT_EQ(format_rfc3339(Instant{seconds{lh[1].at_s}}), "2040-10-06T15:30:00Z");  // 02:00 +10:30 → 02:30
  // Times after the date, Julian days, no DST, garbage.
  EXPECT_EQ(detail::posix_rule_transitions("CET-1CEST,M3.5.0,M10.5.0/3", 2040, 2040).size(), 2u);
  EXPECT_EQ(detail::posix_rule_transitions("XXX3YYY,J60/0,J300/0", 2040, 2040).size(), 2u);
  EXPECT_TRUE(detail::posix_rule_transitions("IST-5:30", 2040, 2040).empty());
  // Regression (review): permanent DST makes one year's end meet the next
  // year's start; the later rule must win, leaving DST in force.
  const auto permanent = detail::posix_rule_transitions("EST5EDT4,0/0,J365/25", 2040, 2042);
  for (std::size_t i = 1; i < permanent.size(); ++i) EXPECT_LT(permanent[i - 1].at_s, permanent[i].at_s);
  ASSERT_EQ(permanent.size(), 4u);  // three starts, then the last year's end at the edge of the range
  for (std::size_t i = 0; i + 1 < permanent.size(); ++i) EXPECT_EQ(permanent[i].offset_s, -4 * 3600);
  EXPECT_TRUE(detail::posix_rule_transitions("EST5EDT,M13.1.0,M11.1.0", 2040, 2040).empty());
  EXPECT_TRUE(detail::posix_rule_transitions("", 2040, 2040).empty());
}

}  // namespace
}  // namespace fleetcron
