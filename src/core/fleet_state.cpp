#include "fleetcron/fleet_state.h"

#include <fmt/format.h>

#include <stdexcept>

#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

void check_job_key(std::string_view job_key) {
  if (job_key.find_first_not_of(" \t") == std::string_view::npos) {
    throw std::invalid_argument("fleet state: the job key is blank");
  }
}

void check_cursor_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for,
                            const std::optional<JobCursor>& seen, std::optional<Instant> instant) {
  check_job_key(job_key);
  if (keep_for < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(
        fmt::format("fleet state: keep_for {} for job \"{}\" is below 1ms", format_duration(keep_for), job_key));
  }
  if (seen && instant && *instant <= seen->instant) {
    throw std::invalid_argument(fmt::format("fleet state: catch-up of job \"{}\" to {} is not after the cursor {}",
                                            job_key, format_rfc3339(*instant), format_rfc3339(seen->instant)));
  }
}

}  // namespace fleetcron
