#include "fleetcron/fleet_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

Instant cursor_instant(Instant at) noexcept { return std::chrono::floor<std::chrono::microseconds>(at); }

void check_job_key(std::string_view job_key) {
  const bool blank = std::all_of(job_key.begin(), job_key.end(),
                                 [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (blank) throw std::invalid_argument("fleet state: the job key is blank");
}

void check_cursor_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for) {
  check_job_key(job_key);
  if (keep_for < std::chrono::milliseconds{1} || keep_for > max_cursor_keep_for) {
    throw std::invalid_argument(fmt::format("fleet state: keep_for {} for job \"{}\" is outside 1ms..{}",
                                            format_duration(keep_for), job_key,
                                            format_duration(max_cursor_keep_for)));
  }
}

void check_catch_up_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for,
                              const std::optional<JobCursor>& seen, Instant instant, std::string_view claimant) {
  check_cursor_arguments(job_key, keep_for);
  if (seen && cursor_instant(instant) <= seen->instant) {
    throw std::invalid_argument(fmt::format("fleet state: catch-up of job \"{}\" to {} is not after the cursor {}",
                                            job_key, format_rfc3339(instant), format_rfc3339(seen->instant)));
  }
  const bool spaced = std::any_of(claimant.begin(), claimant.end(),
                                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (claimant.empty() || claimant.size() > 64 || spaced) {
    throw std::invalid_argument(fmt::format(
        "fleet state: claimant \"{}\" of job \"{}\" is not 1 to 64 characters without whitespace", claimant, job_key));
  }
}

}  // namespace fleetcron
