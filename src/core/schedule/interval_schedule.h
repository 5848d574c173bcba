// Internal: fixed-interval schedules, shared by every() and `@every`.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "fleetcron/schedule.h"

namespace fleetcron::detail {

/// every(d) (no anchor: next = after + d), every(d, anchor) and
/// aligned_every(d) (anchor = the Unix epoch). `spec` is what spec() shows.
[[nodiscard]] SchedulePtr make_interval_schedule(std::chrono::nanoseconds interval, std::optional<Instant> anchor,
                                                 std::string spec);

}  // namespace fleetcron::detail
