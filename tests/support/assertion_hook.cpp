// Linked into every GoogleTest executable: a failed FLEETCRON_ASSERT fails
// the test that is running, naming the condition and where it broke,
// instead of aborting the whole executable (and every test after it).
// The code runs on past the broken invariant, so the test reports what
// else went wrong too. From any thread: GoogleTest's failures are
// thread-safe on this platform.
#include <gtest/gtest.h>

#include "core/support/assert.h"

namespace fleetcron::testing {
namespace {

void fail_the_running_test(const char* condition, const char* file, int line) noexcept {
  ADD_FAILURE_AT(file, line) << "fleetcron: assertion failed: " << condition;
}

const bool installed = [] {
  detail::set_assertion_handler(fail_the_running_test);
  return true;
}();

}  // namespace
}  // namespace fleetcron::testing
