// The cursor's text form (fleet_state.h), as Redis and NATS store it: four
// fields, and the store epoch as an optional fifth.
#include <gtest/gtest.h>

#include "fleetcron/fleet_state.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron {
namespace {

TEST(CursorRecord, RoundTripsWithAndWithoutAnEpoch) {
  JobCursor cursor{Instant{std::chrono::microseconds{1767322800000000}}, 42, 3, "", ""};
  EXPECT_EQ(format_cursor_record(cursor), "1767322800000000 42 3 -");
  EXPECT_EQ(parse_cursor_record("1767322800000000 42 3 -"), cursor);
  cursor.claimant = "web-1";
  cursor.epoch = "b43e8309c62c97e583a0b4efa1ccad87bebac174";
  const std::string text = format_cursor_record(cursor);
  EXPECT_EQ(text, "1767322800000000 42 3 web-1 b43e8309c62c97e583a0b4efa1ccad87bebac174");
  EXPECT_EQ(parse_cursor_record(text), cursor);
}

TEST(CursorRecord, AnythingElseIsNotACursor) {
  for (const char* text : {"", "1 2 3", "1 2 3 ", "1 2 3 - ", "1 2 3 - e f", "x 2 3 -", "1 -2 3 -", "1 2 3  e"}) {
    EXPECT_FALSE(parse_cursor_record(text)) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace fleetcron
