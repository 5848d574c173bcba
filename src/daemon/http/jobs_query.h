// Which jobs a view of the API shows: `?limit=&after=&prefix=&state=` of
// GET /api/v1/jobs and /api/v1/fleet (docs/api.md#paging-and-filters), so
// that a fleet of 100,000 jobs is read a page at a time.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "daemon/observe/fleet_view.h"

namespace fleetcron::daemon {

/// limit=: 1 to 1,000, default 500.
inline constexpr std::size_t api_max_page_jobs = 1000;
inline constexpr std::size_t api_default_page_jobs = 500;
/// A page filtered by a state the ledger tells (running, failing) reads
/// at most this many jobs' ledgers; `next` then says where to go on.
inline constexpr std::size_t api_max_ledger_scan = 2000;

enum class JobState {
  paused,   ///< paused fleet-wide (the controls)
  removed,  ///< dropped by a reload and mentioned by no replica since (the catalogue)
  running,  ///< a run in progress anywhere (the ledger)
  failing,  ///< newest run failed, timed out or lost, or lost fires among the newest 100 (the ledger)
};

struct JobsQuery {
  std::size_t limit = api_default_page_jobs;
  std::string after;   ///< only keys after this one (the previous page's `next`)
  std::string prefix;  ///< only keys that start with it
  std::optional<JobState> state;
};

/// The query of `parameters`, or the error naming the parameter and its
/// value; an unknown parameter is an error too (a typo is not ignored).
[[nodiscard]] std::variant<JobsQuery, std::string> parse_jobs_query(const std::map<std::string, std::string>& parameters);

/// Whether the state needs each job's ledger to be told.
[[nodiscard]] bool needs_ledger(JobState state) noexcept;
/// Whether `job` (its ledger fields read, if needs_ledger) is in `state`.
[[nodiscard]] bool in_state(const JobView& job, JobState state);

}  // namespace fleetcron::daemon
