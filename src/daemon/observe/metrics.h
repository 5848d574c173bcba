// The daemon's metrics, written in the Prometheus text format (0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "fleetcron/events.h"

namespace fleetcron::daemon {

/// A histogram of seconds with fixed buckets.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  void write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;  // guards the members below
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), plus +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

/// Everything /metrics shows. Counters are keyed by their label values.
class Metrics {
 public:
  Metrics();

  void fire();  // a fire reached a worker (automatic)
  /// A run ended: its outcome (its last attempt's) and its whole duration.
  void run_finished(const std::string& outcome, double duration_seconds);
  void retried();  // an attempt failed or timed out, and another follows
  void skipped(const std::string& reason);
  void missed(std::uint64_t count);
  void lateness(double seconds);
  /// How late one probe of the host's scheduling woke (SchedulingLag).
  void scheduling_lag(double seconds);
  void running(int delta);
  void leader(bool leading, std::uint64_t term);
  void backend_error();
  void backend_latency(double seconds);
  void clock_offset(double seconds);
  void jobs_loaded(std::size_t count);
  void reloads(bool ok);
  void log_lines_lost(std::uint64_t total);
  void log_lines_dropped(std::uint64_t total);
  void cancelled(CancelReason reason, bool claimed);
  void step_down();
  void lost();  // another replica's run, found lost here
  /// A notification: kind command, webhook or ping; result delivered,
  /// failed (every attempt) or dropped (the queue was full, or the daemon stopped).
  void notification(const std::string& kind, const std::string& result);
  /// The per-job series read from the fleet state (render_job_metrics()),
  /// at `at`; or a failed refresh (the last series stay).
  void fleet_jobs(std::string text, double at_seconds);
  void fleet_jobs_failed();
  /// Redis's maxmemory-policy as last read ("" if unreadable) and whether it
  /// is known to be noeviction.
  void backend_config(const std::string& policy, bool ok);

  [[nodiscard]] std::string render() const;

 private:
  // render()'s parts: fires and runs; the run's and the backend's gauges
  // and latencies; the daemon's own (logs, jobs, notifications, reloads).
  void render_fires(std::string& out) const;
  void render_backend(std::string& out) const;
  void render_daemon(std::string& out) const;

  std::atomic<std::uint64_t> fires_{0}, retries_{0}, missed_{0}, backend_errors_{0}, reloads_ok_{0}, reloads_failed_{0};
  std::atomic<std::int64_t> running_{0};
  std::atomic<int> leader_{0};
  std::atomic<std::uint64_t> term_{0};
  std::atomic<std::uint64_t> jobs_{0};
  std::atomic<std::uint64_t> log_lines_lost_{0};
  std::atomic<std::uint64_t> log_lines_dropped_{0};
  std::atomic<std::uint64_t> step_downs_{0};
  std::atomic<std::uint64_t> lost_{0};
  std::string fleet_jobs_;  // guarded by mutex_
  std::optional<double> fleet_jobs_at_;
  std::atomic<std::uint64_t> fleet_jobs_failures_{0};
  /// By reason, then unclaimed (0) and claimed (1).
  std::array<std::array<std::atomic<std::uint64_t>, 2>, 5> cancelled_{};  // index: CancelReason (unknown stays 0)
  std::atomic<double> clock_offset_{0};
  mutable std::mutex mutex_;  // guards the maps
  std::map<std::string, std::uint64_t> runs_, skips_, notifications_;
  std::optional<std::pair<std::string, bool>> backend_config_;  // unset until read (Redis only)
  Histogram lateness_, duration_, backend_latency_, scheduling_lag_;
};

}  // namespace fleetcron::daemon
