#include "daemon/http/jobs_query.h"

#include <fmt/format.h>

#include <charconv>

namespace fleetcron::daemon {

namespace {

constexpr std::string_view state_names = "paused, removed, running or failing";

std::optional<JobState> state_named(std::string_view name) {
  if (name == "paused") return JobState::paused;
  if (name == "removed") return JobState::removed;
  if (name == "running") return JobState::running;
  if (name == "failing") return JobState::failing;
  return std::nullopt;
}

}  // namespace

std::variant<JobsQuery, std::string> parse_jobs_query(const std::map<std::string, std::string>& parameters) {
  JobsQuery query;
  for (const auto& [name, value] : parameters) {
    if (name == "limit") {
      const auto [end, failure] = std::from_chars(value.data(), value.data() + value.size(), query.limit);
      if (failure != std::errc{} || end != value.data() + value.size() || query.limit < 1 ||
          query.limit > api_max_page_jobs) {
        return fmt::format("limit \"{}\": expected 1 to {}", value, api_max_page_jobs);
      }
    } else if (name == "after") {
      query.after = value;
    } else if (name == "prefix") {
      query.prefix = value;
    } else if (name == "state") {
      query.state = state_named(value);
      if (!query.state) return fmt::format("state \"{}\": expected {}", value, state_names);
    } else {
      return fmt::format("unknown parameter \"{}\": expected limit, after, prefix or state", name);
    }
  }
  return query;
}

bool needs_ledger(JobState state) noexcept { return state == JobState::running || state == JobState::failing; }

bool in_state(const JobView& job, JobState state) {
  switch (state) {
    case JobState::paused: return job.control && job.control->paused;
    case JobState::removed: return job.catalogued && job.catalogued->removed;
    case JobState::running: return !job.running.empty();
    case JobState::failing: return job_failing(job);
  }
  return false;
}

}  // namespace fleetcron::daemon
