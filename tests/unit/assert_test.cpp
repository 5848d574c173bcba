// FLEETCRON_ASSERT stays on in every build (these tests run in
// RelWithDebInfo, where assert() is compiled out).
#include <gtest/gtest.h>

#include "core/support/assert.h"

namespace fleetcron {
namespace {

int checked_half(int even) {
  FLEETCRON_ASSERT(even % 2 == 0);
  return even / 2;
}

TEST(Assert, AHoldingInvariantPassesThrough) { EXPECT_EQ(checked_half(8), 4); }

TEST(AssertDeathTest, ABrokenInvariantAbortsNamingTheConditionAndWhere) {
  EXPECT_DEATH((void)checked_half(7), "fleetcron: assertion failed: even % 2 == 0 \\(.*assert_test.cpp:[0-9]+\\)");
}

}  // namespace
}  // namespace fleetcron
