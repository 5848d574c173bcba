// fleetcron — RFC 3339 timestamps, the text form of every instant.
#pragma once

#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/time.h"
#include "fleetcron/time_zone.h"

namespace fleetcron {

/// Formats `at` as RFC 3339 in `zone` with its offset, e.g.
/// "2026-03-08T03:00:00-04:00"; UTC prints "Z". Fractional seconds appear
/// only when nonzero, without trailing zeros ("…:05.5Z"), like Go's
/// RFC3339Nano, so fire keys formatted in UTC match libtnb/cron's.
[[nodiscard]] FLEETCRON_API std::string format_rfc3339(Instant at, TimeZone zone = TimeZone::utc());

/// Parses "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)" ('t', 'z' and a space
/// for 'T' are accepted). The offset is required. Throws ParseError with
/// field "time" and the offset of the first wrong character.
[[nodiscard]] FLEETCRON_API Instant parse_rfc3339(std::string_view text);

}  // namespace fleetcron
