// Which jobs /metrics has fleetcron_job_* series for (--job-metrics;
// docs/daemon.md#observability).
#pragma once

namespace fleetcron::daemon {

enum class JobMetricsScope {
  all,      ///< every job: about 240 bytes a job per scrape
  failing,  ///< jobs to act on: newest run failed, timed out or lost; lost fires; paused
  none,     ///< none, and the fleet state is not read for them
};

}  // namespace fleetcron::daemon
