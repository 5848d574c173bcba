#include "daemon/observe/job_lookup.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "daemon/cli/commands.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

/// Levenshtein distance, bounded in cost by the keys' 1,024 bytes.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> nearest_keys(const std::string& job, const std::vector<std::string>& keys, std::size_t count) {
  std::vector<std::pair<std::size_t, std::string>> ranked;
  ranked.reserve(keys.size());
  for (const auto& key : keys) ranked.emplace_back(distance(job, key), key);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ranked.size() && out.size() < count; ++i) out.push_back(ranked[i].second);
  return out;
}

std::string removed_job_refusal(std::string_view job, std::string_view by, Instant at, std::string_view force_hint) {
  return fmt::format("job \"{}\" was removed from the jobs of {} at {} (a reload) and no replica runs it now; {}", job,
                     by, format_rfc3339(at), force_hint);
}

JobLookup look_up_job(FleetState& state, Instant now, const std::string& job, bool controls_count, bool to_control) {
  const CatalogueRead catalogue = state.read_catalogue(now);
  if (catalogue.status != CatalogueRead::Status::found) {
    throw std::runtime_error("reading the fleet's catalogue: " + catalogue.error);
  }
  std::vector<std::string> keys;
  const CataloguedJob* removed = nullptr;
  for (const auto& entry : catalogue.jobs) {
    keys.push_back(entry.job_key);
    if (entry.job_key != job) continue;
    if (!entry.removed || !to_control) return {true, {}};
    removed = &entry;  // a reload dropped it: known, but no replica runs it to control
  }
  if (controls_count) {
    const ControlsRead controls = state.read_controls(now);
    if (controls.status == ControlsRead::Status::error) throw std::runtime_error("reading the fleet's controls: " + controls.error);
    for (const auto& control : controls.jobs) {
      if (control.job_key == job) return {true, {}};
    }
  }
  if (removed != nullptr) {
    return {false, removed_job_refusal(terminal_safe(job), terminal_safe(removed->seen_by), *removed->removed,
                                       "--force acts on it anyway")};
  }
  if (keys.empty()) {
    return {false, fmt::format("no job \"{}\" in the fleet's catalogue, which is empty: no replica has announced its "
                               "jobs (is the coordinator the fleet's?)",
                               terminal_safe(job))};
  }
  std::string suggestions;
  for (const auto& key : nearest_keys(job, keys)) suggestions += (suggestions.empty() ? "\"" : ", \"") + terminal_safe(key) + "\"";
  return {false, fmt::format("no job \"{}\" in the fleet's catalogue ({} job(s)); the nearest: {}{}", terminal_safe(job),
                             keys.size(), suggestions,
                             to_control ? ". A job no replica has announced yet, or whose replicas could not write the "
                                          "catalogue (they log \"job catalogue: this replica's jobs were not written\"), "
                                          "needs --force"
                                        : "")};
}

}  // namespace fleetcron::daemon
