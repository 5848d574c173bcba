// FLEETCRON_ASSERT stays on in every build (these tests run in
// RelWithDebInfo, where assert() is compiled out), and the test hook
// makes a failed one observable.
#include <gtest/gtest.h>

#include <string>

#include "core/support/assert.h"

namespace fleetcron {
namespace {

int checked_half(int even) {
  FLEETCRON_ASSERT(even % 2 == 0);
  return even / 2;
}

TEST(Assert, AHoldingInvariantPassesThrough) { EXPECT_EQ(checked_half(8), 4); }

TEST(AssertDeathTest, ABrokenInvariantAbortsNamingTheConditionAndWhere) {
  // Without a handler, as in production (the tests' own hook is removed
  // in the child that dies).
  EXPECT_DEATH(
      {
        detail::set_assertion_handler(nullptr);
        (void)checked_half(7);
      },
      "fleetcron: assertion failed: even % 2 == 0 \\(.*assert_test.cpp:[0-9]+\\)");
}

std::string seen_condition;
int seen_failures = 0;
void record(const char* condition, const char*, int) noexcept {
  seen_condition = condition;
  ++seen_failures;
}

TEST(Assert, TheTestHookSeesABrokenInvariantAndTheCodeRunsOn) {
  const detail::AssertionHandler previous = detail::set_assertion_handler(record);
  EXPECT_NE(previous, nullptr) << "tests/support/assertion_hook.cpp is linked into every test executable";
  seen_failures = 0;
  EXPECT_EQ(checked_half(7), 3);  // ran on past the check
  EXPECT_EQ(checked_half(8), 4);
  detail::set_assertion_handler(previous);
  EXPECT_EQ(seen_failures, 1);
  EXPECT_EQ(seen_condition, "even % 2 == 0");
}

}  // namespace
}  // namespace fleetcron
