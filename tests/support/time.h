// Test support: instants written as RFC 3339 text.
#pragma once

#include <string_view>

#include "fleetcron/rfc3339.h"

namespace fleetcron::test {

inline Instant at(std::string_view rfc3339) { return parse_rfc3339(rfc3339); }

/// The real wall clock as an Instant.
inline Instant real_now() {
  return Instant{std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())};
}

}  // namespace fleetcron::test
