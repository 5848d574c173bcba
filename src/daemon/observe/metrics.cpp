#include "daemon/observe/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace fleetcron::daemon {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  std::lock_guard guard(mutex_);
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard guard(mutex_);
  std::uint64_t cumulative = 0;
  const std::string separator = labels.empty() ? "" : ",";
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, separator, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, separator, cumulative);
  out += fmt::format("{}_sum{} {}\n", name, labels.empty() ? "" : "{" + labels + "}", sum_);
  out += fmt::format("{}_count{} {}\n", name, labels.empty() ? "" : "{" + labels + "}", count_);
}

Metrics::Metrics()
    : lateness_({0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60}),
      duration_({0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600}),
      backend_latency_({0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1}),
      scheduling_lag_({0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}) {}

void Metrics::fire() { fires_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::run_finished(const std::string& outcome, double duration_seconds) {
  {
    std::lock_guard guard(mutex_);
    ++runs_[outcome];
  }
  duration_.observe(duration_seconds);
}
void Metrics::retried() { retries_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::skipped(const std::string& reason) {
  std::lock_guard guard(mutex_);
  ++skips_[reason];
}
void Metrics::notification(const std::string& kind, const std::string& result) {
  std::lock_guard guard(mutex_);
  ++notifications_["kind=\"" + kind + "\",result=\"" + result + "\""];
}
void Metrics::missed(std::uint64_t count) { missed_.fetch_add(count, std::memory_order_relaxed); }
void Metrics::lateness(double seconds) { lateness_.observe(seconds); }
void Metrics::scheduling_lag(double seconds) { scheduling_lag_.observe(seconds); }
void Metrics::running(int delta) { running_.fetch_add(delta, std::memory_order_relaxed); }
void Metrics::leader(bool leading, std::uint64_t term) {
  leader_.store(leading ? 1 : 0);
  if (leading) term_.store(term);
}
void Metrics::backend_error() { backend_errors_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::backend_latency(double seconds) { backend_latency_.observe(seconds); }
void Metrics::clock_offset(double seconds) { clock_offset_.store(seconds); }

void Metrics::backend_config(const std::string& policy, bool ok) {
  std::lock_guard guard(mutex_);
  backend_config_ = std::make_pair(policy, ok);
}
void Metrics::log_lines_lost(std::uint64_t total) { log_lines_lost_.store(total); }
void Metrics::log_lines_dropped(std::uint64_t total) { log_lines_dropped_.store(total); }
void Metrics::jobs_loaded(std::size_t count) { jobs_.store(count); }
void Metrics::cancelled(CancelReason reason, bool claimed) {
  cancelled_.at(static_cast<std::size_t>(reason))[claimed ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
}
void Metrics::step_down() { step_downs_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::lost() { lost_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::fleet_jobs(std::string text, double at_seconds) {
  std::lock_guard guard(mutex_);
  fleet_jobs_ = std::move(text);
  fleet_jobs_at_ = at_seconds;
}
void Metrics::fleet_jobs_failed() { fleet_jobs_failures_.fetch_add(1, std::memory_order_relaxed); }
void Metrics::reloads(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1, std::memory_order_relaxed); }

namespace {

void describe(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
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

}  // namespace

std::string Metrics::render() const {
  std::string out;
  render_fires(out);
  render_backend(out);
  render_daemon(out);
  return out;
}

void Metrics::render_fires(std::string& out) const {
  const auto metric = [&](const char* name, const char* type, const char* help) { describe(out, name, type, help); };
  metric("fleetcron_fires_total", "counter", "Automatic fires that reached a worker.");
  out += fmt::format("fleetcron_fires_total {}\n", fires_.load());
  metric("fleetcron_retries_total", "counter", "Attempts that failed or timed out and were retried.");
  out += fmt::format("fleetcron_retries_total {}\n", retries_.load());
  metric("fleetcron_runs_total", "counter", "Runs by outcome (the last attempt's), retried attempts included once.");
  {
    std::lock_guard guard(mutex_);
    for (const char* outcome : {"succeeded", "failed", "timed-out", "cancelled"}) {
      const auto it = runs_.find(outcome);
      out += fmt::format("fleetcron_runs_total{{outcome=\"{}\"}} {}\n", outcome, it == runs_.end() ? 0 : it->second);
    }
    metric("fleetcron_skips_total", "counter", "Fires skipped, by reason.");
    for (const std::string_view reason : skip_reasons()) {
      const auto it = skips_.find(std::string(reason));
      out += fmt::format("fleetcron_skips_total{{reason=\"{}\"}} {}\n", reason, it == skips_.end() ? 0 : it->second);
    }
  }
  metric("fleetcron_cancelled_total", "counter",
         "Fires dropped before their job started, by reason; claimed=\"true\" ones ran nowhere (lost).");
  for (const auto reason : {CancelReason::scheduler_stopped, CancelReason::entry_removed, CancelReason::entry_paused,
                            CancelReason::stopped_before_start}) {
    for (const int claimed : {0, 1}) {
      out += fmt::format("fleetcron_cancelled_total{{reason=\"{}\",claimed=\"{}\"}} {}\n", to_string(reason),
                         claimed ? "true" : "false", cancelled_.at(static_cast<std::size_t>(reason))[claimed ? 1u : 0u].load());
    }
  }
  metric("fleetcron_leadership_step_downs_total", "counter",
         "Times this replica stopped leading because its claims kept failing (both coordination).");
  out += fmt::format("fleetcron_leadership_step_downs_total {}\n", step_downs_.load());
  metric("fleetcron_lost_fires_total", "counter",
         "Runs of other replicas this replica found lost: their runner's registry record expired while it ran them.");
  out += fmt::format("fleetcron_lost_fires_total {}\n", lost_.load());
  metric("fleetcron_missed_fires_total", "counter", "Fires missed (late beyond tolerance), by count.");
  out += fmt::format("fleetcron_missed_fires_total {}\n", missed_.load());
  metric("fleetcron_fire_lateness_seconds", "histogram", "Start of a run after its scheduled instant.");
  lateness_.write(out, "fleetcron_fire_lateness_seconds", "");
}

void Metrics::render_backend(std::string& out) const {
  const auto metric = [&](const char* name, const char* type, const char* help) { describe(out, name, type, help); };
  metric("fleetcron_scheduling_lag_seconds", "histogram",
         "How late the host woke this daemon's threads (a probe sleeping 100 ms on the steady clock).");
  scheduling_lag_.write(out, "fleetcron_scheduling_lag_seconds", "");
  metric("fleetcron_run_duration_seconds", "histogram", "Duration of finished runs, from the first attempt's start to the last one's end.");
  duration_.write(out, "fleetcron_run_duration_seconds", "");
  metric("fleetcron_running_jobs", "gauge", "Runs in progress.");
  out += fmt::format("fleetcron_running_jobs {}\n", running_.load());
  metric("fleetcron_leader", "gauge", "1 while this replica leads (leader or both coordination).");
  out += fmt::format("fleetcron_leader {}\n", leader_.load());
  metric("fleetcron_leader_term", "gauge", "The term (fencing token) of the leadership last held.");
  out += fmt::format("fleetcron_leader_term {}\n", term_.load());
  metric("fleetcron_backend_errors_total", "counter", "Failed calls to the coordination backend.");
  out += fmt::format("fleetcron_backend_errors_total {}\n", backend_errors_.load());
  metric("fleetcron_backend_latency_seconds", "histogram", "Latency of claim and election calls.");
  backend_latency_.write(out, "fleetcron_backend_latency_seconds", "");
  metric("fleetcron_clock_offset_seconds", "gauge", "Backend clock minus local clock, as the claimer last measured it (Redis, NATS, PostgreSQL; 0 before).");
  out += fmt::format("fleetcron_clock_offset_seconds {}\n", clock_offset_.load());
  std::lock_guard guard(mutex_);
  if (backend_config_) {
    metric("fleetcron_backend_config_ok", "gauge",
           "1 if the Redis maxmemory-policy is noeviction; 0 if it is another or cannot be read (\"\").");
    out += fmt::format("fleetcron_backend_config_ok{{maxmemory_policy=\"{}\"}} {}\n", backend_config_->first,
                       backend_config_->second ? 1 : 0);
  }
}

void Metrics::render_daemon(std::string& out) const {
  const auto metric = [&](const char* name, const char* type, const char* help) { describe(out, name, type, help); };
  metric("fleetcron_log_lines_lost_total", "counter", "Log lines the output refused (full disk, closed pipe).");
  out += fmt::format("fleetcron_log_lines_lost_total {}\n", log_lines_lost_.load());
  metric("fleetcron_log_lines_dropped_total", "counter", "Log lines dropped because the output could not keep up.");
  out += fmt::format("fleetcron_log_lines_dropped_total {}\n", log_lines_dropped_.load());
  metric("fleetcron_jobs", "gauge", "Jobs loaded from the jobs file.");
  out += fmt::format("fleetcron_jobs {}\n", jobs_.load());
  {
    std::lock_guard guard(mutex_);
    metric("fleetcron_notifications_total", "counter",
           "Notifications (on-failure/on-lost/on-missed commands, webhooks, pings), by kind and result.");
    for (const auto& [labels, count] : notifications_) out += fmt::format("fleetcron_notifications_total{{{}}} {}\n", labels, count);
  }
  metric("fleetcron_reloads_total", "counter", "Jobs file reloads, by result.");
  out += fmt::format("fleetcron_reloads_total{{result=\"ok\"}} {}\n", reloads_ok_.load());
  out += fmt::format("fleetcron_reloads_total{{result=\"failed\"}} {}\n", reloads_failed_.load());
  metric("fleetcron_job_metrics_refresh_failures_total", "counter",
         "Reads of the fleet state for the fleetcron_job_* series that failed (the last values stay).");
  out += fmt::format("fleetcron_job_metrics_refresh_failures_total {}\n", fleet_jobs_failures_.load());
  std::lock_guard guard(mutex_);
  if (fleet_jobs_at_) {
    metric("fleetcron_job_metrics_refreshed_timestamp_seconds", "gauge",
           "When the fleetcron_job_* series were last read from the fleet state.");
    out += fmt::format("fleetcron_job_metrics_refreshed_timestamp_seconds {}\n", *fleet_jobs_at_);
    out += fleet_jobs_;
  }
}

}  // namespace fleetcron::daemon
