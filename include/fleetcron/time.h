// fleetcron — time types shared by every public header.
#pragma once

#include <chrono>

namespace fleetcron {

/// An absolute instant (UTC, nanosecond resolution). Every fire instant,
/// scheduled time and fire key is expressed as an Instant; wall-clock
/// (local) times exist only inside the schedule calculation.
using Instant = std::chrono::sys_time<std::chrono::nanoseconds>;

/// The range of instants the schedules compute over: 1970-01-01T00:00:00Z
/// (inclusive) to 2200-01-01T00:00:00Z (exclusive). Schedule::next() of an
/// instant outside it returns "none", and never returns one outside it.
/// The span (230 years) stays inside the ±292-year range of int64
/// nanoseconds, so no difference of two supported instants can overflow.
inline constexpr Instant min_supported_instant{
    std::chrono::sys_days{std::chrono::year{1970} / 1 / 1}};
inline constexpr Instant max_supported_instant{
    std::chrono::sys_days{std::chrono::year{2200} / 1 / 1}};

}  // namespace fleetcron
