#include "daemon/observe/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

namespace fleetcron::daemon {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Registry;

Family<Counter>& counters(Registry& registry, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}
Family<Gauge>& gauges(Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}
Family<Histogram>& histograms(Registry& registry, const char* name, const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

// Every SkipReason's name, and the queue's own reason: none kept by hand.
std::vector<std::string_view> skip_reasons() {
  std::vector<std::string_view> names;
  for (int r = static_cast<int>(SkipReason::not_leader); r <= static_cast<int>(SkipReason::registry_error); ++r) {
    names.push_back(to_string(static_cast<SkipReason>(r)));
  }
  names.push_back("queue-full");
  return names;
}

constexpr CancelReason cancel_reasons[] = {CancelReason::scheduler_stopped, CancelReason::entry_removed,
                                           CancelReason::entry_paused, CancelReason::stopped_before_start};

}  // namespace

/// The registry, and each series the daemon moves (those with a label
/// known in advance are made at once, so a scrape shows them at 0).
struct Metrics::Series {
  Registry registry;
  Counter& fires = counters(registry, "fleetcron_fires_total", "Automatic fires that reached a worker.").Add({});
  Counter& retries = counters(registry, "fleetcron_retries_total", "Attempts that failed or timed out and were retried.").Add({});
  Family<Counter>& runs = counters(registry, "fleetcron_runs_total",
                                   "Runs by outcome (the last attempt's), retried attempts included once.");
  Family<Counter>& skips = counters(registry, "fleetcron_skips_total", "Fires skipped, by reason.");
  Family<Counter>& cancelled = counters(
      registry, "fleetcron_cancelled_total",
      "Fires dropped before their job started, by reason; claimed=\"true\" ones ran nowhere (lost).");
  Counter& step_downs = counters(registry, "fleetcron_leadership_step_downs_total",
                                 "Times this replica stopped leading because its claims kept failing (both coordination).")
                            .Add({});
  Counter& lost = counters(registry, "fleetcron_lost_fires_total",
                           "Runs of other replicas this replica found lost: their runner's registry record expired "
                           "while it ran them.")
                      .Add({});
  Counter& missed = counters(registry, "fleetcron_missed_fires_total", "Fires missed (late beyond tolerance), by count.").Add({});
  Histogram& lateness = histograms(registry, "fleetcron_fire_lateness_seconds", "Start of a run after its scheduled instant.")
                            .Add({}, Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60});
  Histogram& scheduling_lag =
      histograms(registry, "fleetcron_scheduling_lag_seconds",
                 "How late the host woke this daemon's threads (a probe sleeping 100 ms on the steady clock).")
          .Add({}, Histogram::BucketBoundaries{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5});
  Histogram& duration =
      histograms(registry, "fleetcron_run_duration_seconds",
                 "Duration of finished runs, from the first attempt's start to the last one's end.")
          .Add({}, Histogram::BucketBoundaries{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600});
  Gauge& running = gauges(registry, "fleetcron_running_jobs", "Runs in progress.").Add({});
  Gauge& leader = gauges(registry, "fleetcron_leader", "1 while this replica leads (leader or both coordination).").Add({});
  Gauge& term = gauges(registry, "fleetcron_leader_term", "The term (fencing token) of the leadership last held.").Add({});
  Counter& backend_errors =
      counters(registry, "fleetcron_backend_errors_total", "Failed calls to the coordination backend.").Add({});
  Histogram& backend_latency = histograms(registry, "fleetcron_backend_latency_seconds", "Latency of claim and election calls.")
                                   .Add({}, Histogram::BucketBoundaries{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1});
  Gauge& clock_offset = gauges(registry, "fleetcron_clock_offset_seconds",
                               "Backend clock minus local clock, as the claimer last measured it (Redis, NATS, "
                               "PostgreSQL; 0 before).")
                            .Add({});
  Family<Gauge>& backend_config = gauges(
      registry, "fleetcron_backend_config_ok",
      "1 if the Redis maxmemory-policy is noeviction; 0 if it is another or cannot be read (\"\").");
  Counter& log_lines_lost =
      counters(registry, "fleetcron_log_lines_lost_total", "Log lines the output refused (full disk, closed pipe).").Add({});
  Counter& log_lines_dropped =
      counters(registry, "fleetcron_log_lines_dropped_total", "Log lines dropped because the output could not keep up.")
          .Add({});
  Gauge& jobs = gauges(registry, "fleetcron_jobs", "Jobs loaded from the jobs file.").Add({});
  Family<Counter>& notifications = counters(
      registry, "fleetcron_notifications_total",
      "Notifications (on-failure/on-lost/on-missed commands, webhooks, pings), by kind and result.");
  Family<Counter>& reloads = counters(registry, "fleetcron_reloads_total", "Jobs file reloads, by result.");
  Counter& job_metrics_failures =
      counters(registry, "fleetcron_job_metrics_refresh_failures_total",
               "Reads of the fleet state for the fleetcron_job_* series that failed (the last values stay).")
          .Add({});
  Family<Gauge>& job_metrics_refreshed =
      gauges(registry, "fleetcron_job_metrics_refreshed_timestamp_seconds",
             "When the fleetcron_job_* series were last read from the fleet state.");

  std::mutex mutex;  // guards the members below
  Gauge* backend_config_series = nullptr;
  std::string fleet_jobs;  // rendered by render_job_metrics()

  Series() {
    for (const char* outcome : {"succeeded", "failed", "timed-out", "cancelled"}) runs.Add({{"outcome", outcome}});
    for (const std::string_view reason : skip_reasons()) skips.Add({{"reason", std::string(reason)}});
    for (const CancelReason reason : cancel_reasons) {
      for (const char* claimed : {"false", "true"}) {
        cancelled.Add({{"reason", std::string(to_string(reason))}, {"claimed", claimed}});
      }
    }
    reloads.Add({{"result", "ok"}});
    reloads.Add({{"result", "failed"}});
  }
};

Metrics::Metrics() : series_(std::make_unique<Series>()) {}
Metrics::~Metrics() = default;

void Metrics::fire() { series_->fires.Increment(); }
void Metrics::run_finished(const std::string& outcome, double duration_seconds) {
  series_->runs.Add({{"outcome", outcome}}).Increment();
  series_->duration.Observe(duration_seconds);
}
void Metrics::retried() { series_->retries.Increment(); }
void Metrics::skipped(const std::string& reason) { series_->skips.Add({{"reason", reason}}).Increment(); }
void Metrics::notification(const std::string& kind, const std::string& result) {
  series_->notifications.Add({{"kind", kind}, {"result", result}}).Increment();
}
void Metrics::missed(std::uint64_t count) { series_->missed.Increment(static_cast<double>(count)); }
void Metrics::lateness(double seconds) { series_->lateness.Observe(seconds); }
void Metrics::scheduling_lag(double seconds) { series_->scheduling_lag.Observe(seconds); }
void Metrics::running(int delta) { series_->running.Increment(delta); }
void Metrics::leader(bool leading, std::uint64_t term) {
  series_->leader.Set(leading ? 1 : 0);
  if (leading) series_->term.Set(static_cast<double>(term));
}
void Metrics::backend_error() { series_->backend_errors.Increment(); }
void Metrics::backend_latency(double seconds) { series_->backend_latency.Observe(seconds); }
void Metrics::clock_offset(double seconds) { series_->clock_offset.Set(seconds); }
void Metrics::backend_config(const std::string& policy, bool ok) {
  // One series, labelled with the policy last read; a scrape (under the
  // same lock) sees the old one or the new one, never none.
  std::lock_guard guard(series_->mutex);
  Gauge& current = series_->backend_config.Add({{"maxmemory_policy", policy}});
  current.Set(ok ? 1 : 0);
  if (series_->backend_config_series != nullptr && series_->backend_config_series != &current) {
    series_->backend_config.Remove(series_->backend_config_series);
  }
  series_->backend_config_series = &current;
}
// The log's counts are totals the sink keeps: the counters follow them,
// one caller at a time (every scrape brings them up to date).
void Metrics::log_lines_lost(std::uint64_t total) {
  std::lock_guard guard(series_->mutex);
  Counter& counter = series_->log_lines_lost;
  counter.Increment(std::max(0.0, static_cast<double>(total) - counter.Value()));
}
void Metrics::log_lines_dropped(std::uint64_t total) {
  std::lock_guard guard(series_->mutex);
  Counter& counter = series_->log_lines_dropped;
  counter.Increment(std::max(0.0, static_cast<double>(total) - counter.Value()));
}
void Metrics::jobs_loaded(std::size_t count) { series_->jobs.Set(static_cast<double>(count)); }
void Metrics::cancelled(CancelReason reason, bool claimed) {
  series_->cancelled.Add({{"reason", std::string(to_string(reason))}, {"claimed", claimed ? "true" : "false"}}).Increment();
}
void Metrics::step_down() { series_->step_downs.Increment(); }
void Metrics::lost() { series_->lost.Increment(); }
void Metrics::fleet_jobs(std::string text, double at_seconds) {
  std::lock_guard guard(series_->mutex);
  series_->fleet_jobs = std::move(text);
  series_->job_metrics_refreshed.Add({}).Set(at_seconds);
}
void Metrics::fleet_jobs_failed() { series_->job_metrics_failures.Increment(); }
void Metrics::reloads(bool ok) { series_->reloads.Add({{"result", ok ? "ok" : "failed"}}).Increment(); }

std::string Metrics::render() const {
  std::ostringstream out;
  // One lock across both: the refresh's timestamp and its per-job series
  // come from the same read.
  std::lock_guard guard(series_->mutex);
  prometheus::TextSerializer().Serialize(out, series_->registry.Collect());
  out << series_->fleet_jobs;
  return out.str();
}

}  // namespace fleetcron::daemon
