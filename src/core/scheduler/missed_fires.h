// Internal: which instants a missed-fire policy runs after an outage.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetcron/events.h"
#include "fleetcron/schedule.h"

namespace fleetcron::detail {

/// The most instants run_all replays, and the most next() calls spent
/// counting missed instants (beyond it the count is a lower bound). This
/// runs on the loop thread under its lock, so it must stay small: past the
/// limit the latest instant (and run_all's window) come from bisection.
inline constexpr std::size_t run_all_limit = 1000;
inline constexpr std::uint64_t missed_count_limit = run_all_limit;

struct MissedPlan {
  std::vector<Instant> runs;  ///< oldest first
  std::uint64_t missed = 0;   ///< instants in [first_due, now]; capped at missed_count_limit
  bool count_capped = false;
  Instant first_missed{};  ///< first_due
  Instant last_missed{};
  /// The newest missed instants, oldest first: every one up to
  /// run_all_limit; past the count's cap run_all's window, or else only
  /// last_missed (no bisection for instants nothing runs).
  std::vector<Instant> newest;
};

/// `first_due` is an instant of `schedule` that is due (<= now).
[[nodiscard]] MissedPlan plan_missed(const Schedule& schedule, Instant first_due, Instant now, MissedFirePolicy policy);

/// The latest instant of `schedule` in [first_due, now], by bisection
/// (about 64 next() calls whatever the gap).
[[nodiscard]] Instant latest_at_or_before(const Schedule& schedule, Instant first_due, Instant now);

}  // namespace fleetcron::detail
