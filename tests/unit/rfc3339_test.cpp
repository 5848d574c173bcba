#include "fleetcron/rfc3339.h"

#include <gtest/gtest.h>

#include "fleetcron/parse_error.h"

namespace fleetcron {
namespace {

using namespace std::chrono;

TEST(Rfc3339, FormatsInUtcAndInAZone) {
  const Instant t = Instant{sys_days{2026y / March / 8} + 7h};
  EXPECT_EQ(format_rfc3339(t), "2026-03-08T07:00:00Z");
  EXPECT_EQ(format_rfc3339(t, TimeZone::locate("America/New_York")), "2026-03-08T03:00:00-04:00");
  EXPECT_EQ(format_rfc3339(t, TimeZone::locate("Asia/Kolkata")), "2026-03-08T12:30:00+05:30");
  EXPECT_EQ(format_rfc3339(t, TimeZone::locate("Europe/London")), "2026-03-08T07:00:00+00:00");
}

// Regression (review): offsets with seconds were truncated, so the text
// did not parse back to the same instant.
TEST(Rfc3339, OffsetsWithSecondsRoundTrip) {
  const auto monrovia = TimeZone::locate("Africa/Monrovia");  // -00:44:30 until 1972-01-07
  const Instant t = parse_rfc3339("1971-06-01T12:00:00Z");
  const std::string text = format_rfc3339(t, monrovia);
  EXPECT_EQ(text, "1971-06-01T11:16:00-00:44");  // -00:44:30 rounds (to even) to -00:44
  EXPECT_EQ(parse_rfc3339(text), t);
}

TEST(Rfc3339, FractionsAreTrimmedLikeRfc3339Nano) {
  const Instant t = Instant{sys_days{2026y / January / 2} + 15h + 4min + 5s};
  EXPECT_EQ(format_rfc3339(t + 500ms), "2026-01-02T15:04:05.5Z");
  EXPECT_EQ(format_rfc3339(t + 1ns), "2026-01-02T15:04:05.000000001Z");
  EXPECT_EQ(format_rfc3339(t), "2026-01-02T15:04:05Z");
}

TEST(Rfc3339, ParsesOffsetsAndFractions) {
  const Instant t = Instant{sys_days{2026y / March / 8} + 7h};
  EXPECT_EQ(parse_rfc3339("2026-03-08T07:00:00Z"), t);
  EXPECT_EQ(parse_rfc3339("2026-03-08T03:00:00-04:00"), t);
  EXPECT_EQ(parse_rfc3339("2026-03-08t12:30:00+05:30"), t);
  EXPECT_EQ(parse_rfc3339("2026-03-08 07:00:00.25z"), t + 250ms);
}

TEST(Rfc3339, RoundTrips) {
  for (const char* text : {"2026-03-08T03:00:00-04:00", "2199-12-31T23:59:59.999999999Z", "1900-01-01T00:00:00Z"}) {
    EXPECT_EQ(format_rfc3339(parse_rfc3339(text), text[19] == '-' ? TimeZone::locate("America/New_York") : TimeZone::utc()),
              text);
  }
}

TEST(Rfc3339, RejectsWithPosition) {
  struct Case {
    const char* text;
    std::size_t position;
  };
  for (const Case& c : {Case{"", 0}, Case{"2026-3-08T00:00:00Z", 6}, Case{"2026-02-30T00:00:00Z", 8},
                        Case{"2026-03-08T24:00:00Z", 11}, Case{"2026-03-08T00:00:00", 19},
                        Case{"2026-03-08T00:00:00Zjunk", 20}, Case{"2026-03-08T00:00:00.Z", 20},
                        Case{"1899-12-31T00:00:00Z", 0}, Case{"yesterday", 0}}) {
    SCOPED_TRACE(c.text);
    try {
      (void)parse_rfc3339(c.text);
      FAIL() << "accepted";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.field(), "time");
      EXPECT_EQ(e.position(), c.position) << e.what();
    }
  }
}

}  // namespace
}  // namespace fleetcron
