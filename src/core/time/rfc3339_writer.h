// Internal: RFC 3339 into a caller's buffer (fire keys are built on it).
#pragma once

#include <cstddef>

#include "fleetcron/time.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::detail {

/// "YYYY-MM-DDTHH:MM:SS.nnnnnnnnn+HH:MM" is 35 bytes.
inline constexpr std::size_t rfc3339_max_bytes = 40;

/// Writes `at` as format_rfc3339() does; returns the length. `buffer`
/// must hold rfc3339_max_bytes.
std::size_t write_rfc3339(char* buffer, Instant at, TimeZone zone) noexcept;

}  // namespace fleetcron::detail
