#include "core/support/assert.h"

#include <cstdio>
#include <cstdlib>

namespace fleetcron::detail {

void assertion_failed(const char* condition, const char* file, int line) noexcept {
  std::fprintf(stderr, "fleetcron: assertion failed: %s (%s:%d)\n", condition, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace fleetcron::detail
