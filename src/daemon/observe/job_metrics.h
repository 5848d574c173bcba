// Per-job metrics from the fleet state (docs/daemon.md#observability): the
// same values on every replica, read from the store every
// job_metrics_interval, so that an alert such as "no success within 3×
// the interval" needs nothing else.
#pragma once

#include <chrono>
#include <string>

#include "daemon/observe/fleet_view.h"
#include "daemon/observe/job_metrics_scope.h"

namespace fleetcron::daemon {

inline constexpr std::chrono::seconds job_metrics_interval{15};

/// Whether `job` is one to act on (JobMetricsScope::failing).
[[nodiscard]] bool job_needs_attention(const JobView& job);

/// The fleetcron_job_* series of `view`'s jobs in `scope`, in the
/// Prometheus text format, with their HELP and TYPE lines.
[[nodiscard]] std::string render_job_metrics(const FleetView& view, JobMetricsScope scope = JobMetricsScope::all);

/// `text` as a Prometheus label value: backslash, quote and newline escaped.
[[nodiscard]] std::string label_value(std::string_view text);

}  // namespace fleetcron::daemon
