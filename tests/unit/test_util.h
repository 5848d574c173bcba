// Helpers shared by the unit tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/cron.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/schedule.h"
#include "support/time.h"

namespace fleetcron::test {

/// The next `count` fires of `spec` after `from`, as RFC 3339 in the spec's zone.
inline std::vector<std::string> fires(std::string_view spec, std::string_view from, std::size_t count,
                                      const ParseOptions& options = {}) {
  const SchedulePtr schedule = parse_schedule(spec, options);
  std::vector<std::string> out;
  for (const Instant t : next_n(*schedule, at(from), count)) out.push_back(format_rfc3339(t, schedule->zone()));
  return out;
}

inline ParseOptions in_zone(std::string_view zone, DstPolicy dst = {}) {
  ParseOptions options;
  options.zone = TimeZone::locate(zone);
  options.dst = dst;
  return options;
}

inline ParseOptions with_seconds(SecondsField seconds) {
  ParseOptions options;
  options.seconds = seconds;
  return options;
}

}  // namespace fleetcron::test
