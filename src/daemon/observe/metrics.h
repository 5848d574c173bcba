// The daemon's metrics, written in the Prometheus text format (0.0.4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fleetcron/events.h"

namespace fleetcron::daemon {

/// Everything /metrics shows, kept and written by prometheus-cpp's core
/// library (its registry and text format); the per-job series read from
/// the fleet state are appended as they were rendered. Thread-safe.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

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
  struct Series;  // the registry and its series (prometheus-cpp), in metrics.cpp
  std::unique_ptr<Series> series_;
};

}  // namespace fleetcron::daemon
