#include "core/support/assert.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace fleetcron::detail {

namespace {
std::atomic<AssertionHandler> installed_handler{nullptr};
}  // namespace

AssertionHandler set_assertion_handler(AssertionHandler handler) noexcept {
  return installed_handler.exchange(handler);
}

void assertion_failed(const char* condition, const char* file, int line) noexcept {
  if (const AssertionHandler handler = installed_handler.load()) {
    handler(condition, file, line);
    return;
  }
  std::fprintf(stderr, "fleetcron: assertion failed: %s (%s:%d)\n", condition, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace fleetcron::detail
