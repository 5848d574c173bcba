#include "fleetcron/duration.h"

#include <gtest/gtest.h>

namespace fleetcron {
namespace {

using namespace std::chrono_literals;

TEST(Duration, ParsesGoStyleTerms) {
  EXPECT_EQ(parse_duration("90s"), 90s);
  EXPECT_EQ(parse_duration("1h30m"), 90min);
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("1.5h"), 90min);
  EXPECT_EQ(parse_duration("2d"), 48h);
  EXPECT_EQ(parse_duration("1us"), 1us);
  EXPECT_EQ(parse_duration("1\xC2\xB5s"), 1us);
  EXPECT_EQ(parse_duration("3ns"), 3ns);
  EXPECT_EQ(parse_duration("0"), 0ns);
  EXPECT_EQ(parse_duration(".5s"), 500ms);
}

TEST(Duration, RejectsWithOffsetAndReason) {
  struct Case {
    const char* text;
    std::size_t position;
    const char* reason;
  };
  for (const Case& c : {Case{"", 0, "empty duration"}, Case{"5", 1, "missing unit (ns, us, ms, s, m, h or d)"},
                        Case{"5x", 1, "unknown unit \"x\" (known: ns, us, ms, s, m, h, d)"}, Case{"1h5", 3, "missing unit (ns, us, ms, s, m, h or d)"},
                        Case{"-5s", 0, "expected a number, found '-'"}, Case{"5 s", 1, "unknown unit \" s\" (known: ns, us, ms, s, m, h, d)"},
                        Case{".s", 0, "expected a number"}, Case{"101y", 3, "unknown unit \"y\" (known: ns, us, ms, s, m, h, d)"},
                        Case{"5min", 1, "unknown unit \"min\" (known: ns, us, ms, s, m, h, d; e.g. 5m)"},
                        Case{"1h30mins", 4, "unknown unit \"mins\" (known: ns, us, ms, s, m, h, d; e.g. 30m)"},
                        Case{"40000d", 0, "duration above 100 years"}, Case{"1.0000000001s", 11, "more than 9 fractional digits"}}) {
    SCOPED_TRACE(c.text);
    try {
      (void)parse_duration(c.text);
      FAIL() << "accepted";
    } catch (const DurationError& e) {
      EXPECT_EQ(e.position(), c.position) << e.what();
      EXPECT_EQ(e.reason(), c.reason) << e.what();
    }
  }
}

TEST(Duration, FormatsLikeGo) {
  EXPECT_EQ(format_duration(0ns), "0s");
  EXPECT_EQ(format_duration(90min), "1h30m0s");
  EXPECT_EQ(format_duration(1500ms), "1.5s");
  EXPECT_EQ(format_duration(500ms), "500ms");
  EXPECT_EQ(format_duration(1500us), "1.5ms");
  EXPECT_EQ(format_duration(7ns), "7ns");
  EXPECT_EQ(format_duration(-2s), "-2s");
}

}  // namespace
}  // namespace fleetcron

namespace fleetcron {
namespace {

// Regression: the overflow check ran after the multiplication (UBSan: signed
// overflow on "99999999999999999999h").
TEST(Duration, HugeNumbersAreRejectedWithoutOverflow) {
  for (const char* text : {"99999999999999999999h", "9223372036854775807ns", "922337203685477580s"}) {
    EXPECT_THROW((void)parse_duration(text), DurationError) << text;
  }
}

}  // namespace
}  // namespace fleetcron
