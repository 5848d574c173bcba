// Whether the fleet knows a job, for the commands that name one (`trigger`,
// `pause`, `resume`, `history`): a typo is refused with the keys it may
// have meant, as the API answers 404, instead of creating a phantom job.
#pragma once

#include <string>
#include <string_view>

#include "fleetcron/fleet_state.h"

namespace fleetcron::daemon {

struct JobLookup {
  bool known = false;
  /// When not known: what to say ("no job "x" in the fleet's catalogue
  /// (12 jobs); did you mean "y"?").
  std::string refusal;
};

/// Looks `job` up in the fleet's catalogue and, when `controls_count`, in
/// its controls (a paused job no replica runs any more can be resumed).
/// `to_control`: a job a reload removed is refused, and the refusals name
/// --force (pause, resume, trigger); otherwise (history) it is known.
/// Throws std::runtime_error when the store cannot be read.
[[nodiscard]] JobLookup look_up_job(FleetState& state, Instant now, const std::string& job, bool controls_count,
                                    bool to_control = true);

/// Why a job a reload removed (`by` dropped it at `at`) is not controlled,
/// then `force_hint`; `job` and `by` as the caller shows text.
[[nodiscard]] std::string removed_job_refusal(std::string_view job, std::string_view by, Instant at,
                                              std::string_view force_hint);

/// Up to `count` of `keys` nearest to `job` (edit distance), nearest first.
[[nodiscard]] std::vector<std::string> nearest_keys(const std::string& job, const std::vector<std::string>& keys,
                                                    std::size_t count = 3);

}  // namespace fleetcron::daemon
