#include "daemon/observe/notifier.h"

#include <fmt/format.h>

#include <stdexcept>

#include "daemon/http/http_client.h"
#include "daemon/observe/json_output.h"
#include "daemon/observe/url_redaction.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string_view fate_name(RunStatus status) {
  switch (status) {
    case RunStatus::succeeded: return "succeeded";
    case RunStatus::failed: return "failed";
    case RunStatus::timed_out: return "timed-out";
    case RunStatus::cancelled: return "cancelled";
  }
  return "failed";
}

FireFate fate_of(RunStatus status) {
  switch (status) {
    case RunStatus::succeeded: return FireFate::succeeded;
    case RunStatus::failed: return FireFate::failed;
    case RunStatus::timed_out: return FireFate::timed_out;
    case RunStatus::cancelled: return FireFate::cancelled;
  }
  return FireFate::failed;
}

/// "URL/start", "URL/fail": healthchecks.io's suffixes, before any query.
std::string ping_url(const std::string& url, std::string_view suffix) {
  if (suffix.empty()) return url;
  const auto query = url.find('?');
  std::string base = url.substr(0, query);
  while (base.ends_with('/')) base.pop_back();
  return base + "/" + std::string(suffix) + (query == std::string::npos ? "" : url.substr(query));
}

/// What a log line names: the command, or the URL without its secrets.
std::string shown_target(const Delivery& delivery) {
  return delivery.kind == Delivery::Kind::command ? delivery.target : redact_url(delivery.target);
}

}  // namespace

std::string_view to_string(Delivery::Kind kind) noexcept {
  switch (kind) {
    case Delivery::Kind::command: return "command";
    case Delivery::Kind::webhook: return "webhook";
    case Delivery::Kind::ping: return "ping";
  }
  return "?";
}

namespace {

NotifierOptions checked(NotifierOptions options) {
  if (options.max_queued < 1 || options.max_queued > 100'000) {
    throw std::invalid_argument(
        fmt::format("notifier option max_queued: {} is not between 1 and 100000", options.max_queued));
  }
  if (options.attempts < 1 || options.attempts > 100) {
    throw std::invalid_argument(fmt::format("notifier option attempts: {} is not between 1 and 100", options.attempts));
  }
  return options;
}

}  // namespace

Notifier::Notifier(Metrics& metrics, LogSink& log, std::string replica_id, NotifierOptions options)
    : metrics_(metrics),
      log_(log),
      replica_id_(std::move(replica_id)),
      options_(checked(options)),
      worker_(options_.max_queued,
              [this](Delivery& delivery, detail::RefusedGap, std::stop_token stop) { deliver(delivery, stop); }) {}

Notifier::~Notifier() { stop(SteadyClock::now() + std::chrono::seconds{5}); }

void Notifier::set_jobs(std::map<std::string, NotifiedJob> jobs) {
  std::lock_guard guard(mutex_);
  jobs_ = std::move(jobs);
}

std::optional<NotifiedJob> Notifier::job_of(const std::string& key) {
  std::lock_guard guard(mutex_);
  const auto it = jobs_.find(key);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

void Notifier::on_event(const Event& event) {
  if (const auto* started = std::get_if<JobStartedEvent>(&event)) {
    if (started->attempt != 1) return;
    const auto job = job_of(started->entry->key);
    if (job && !job->notifications.ping.empty()) {
      enqueue(Delivery{Delivery::Kind::ping, started->entry->key, ping_url(job->notifications.ping, "start"), {}, {}});
    }
  } else if (const auto* done = std::get_if<JobCompletedEvent>(&event)) {
    completed(*done);
  } else if (const auto* gone = std::get_if<LostFireEvent>(&event)) {
    lost(*gone);
  } else if (const auto* late = std::get_if<MissedFireEvent>(&event)) {
    missed(*late);
  }
}

void Notifier::completed(const JobCompletedEvent& event) {
  const std::string& key = event.entry->key;
  const auto job = job_of(key);
  if (!job) return;
  const std::string& ping = job->notifications.ping;
  const bool success = event.status == RunStatus::succeeded;
  if (!ping.empty()) enqueue(Delivery{Delivery::Kind::ping, key, ping_url(ping, success ? "" : "fail"), {}, {}});
  if (success || event.status == RunStatus::cancelled) return;  // a stop is not the job's failure
  FireRecord record;
  record.job_key = key;
  record.fire_key = event.fire_key;
  record.scheduled_at = event.scheduled_at;
  record.fate = fate_of(event.status);
  record.manual = event.manual;
  record.replica_id = replica_id_;
  record.fence = event.fence;
  record.attempts = event.attempts;
  record.started_at = event.started_at;
  record.finished_at = event.started_at + event.duration;
  record.duration = event.duration;
  record.exit_status = event.details.exit_status;
  record.signal = event.details.signal;
  record.error = event.error;
  record.output_tail = event.details.output_tail;
  announce(*job, key, record, job->notifications.on_failure,
           {{"FLEETCRON_OUTCOME", std::string(fate_name(event.status))},
            {"FLEETCRON_EXIT_STATUS", event.details.exit_status ? std::to_string(*event.details.exit_status) : ""},
            {"FLEETCRON_SIGNAL", event.details.signal ? std::to_string(*event.details.signal) : ""},
            {"FLEETCRON_ATTEMPTS", std::to_string(event.attempts)},
            {"FLEETCRON_JOB_PAUSED", event.paused ? "1" : "0"}},
           event.paused);
}

void Notifier::lost(const LostFireEvent& event) {
  const auto job = job_of(event.job_key);
  if (!job) return;
  FireRecord record;
  record.job_key = event.job_key;
  record.fire_key = event.fire_key;
  record.scheduled_at = event.scheduled_at;
  record.fate = FireFate::lost;
  record.replica_id = event.replica_id;  // the runner that was lost
  record.fence = event.fence;
  record.started_at = event.started_at;
  record.error = fmt::format("the run's replica {} on {} stopped announcing itself (last at {}); found by {}",
                             event.replica_id, event.host, format_rfc3339(event.last_beat), replica_id_);
  record.reason = event.rerun ? "rerun" : event.not_rerun;
  announce(*job, event.job_key, record, job->notifications.on_lost,
           {{"FLEETCRON_OUTCOME", "lost"}, {"FLEETCRON_LOST_REPLICA", event.replica_id}});
}

void Notifier::missed(const MissedFireEvent& event) {
  if (event.missed == 0) return;
  const std::string& key = event.entry->key;
  const auto job = job_of(key);
  // A fleet job's instants this replica's own loop passed late were likely
  // run on time by another replica: only a catch-up (one replica for the
  // fleet) says the fleet missed them.
  if (!job || (job->fleet_scoped && !event.catch_up)) return;
  FireRecord record;
  record.job_key = key;
  record.fire_key = key + "@" + format_rfc3339(event.first_missed);
  record.scheduled_at = event.first_missed;
  record.fate = FireFate::missed;
  record.replica_id = replica_id_;
  record.reason = std::string(to_string(event.policy));
  record.error = event.withheld;
  record.missed_count = event.missed;
  record.last_missed = event.last_missed;
  announce(*job, key, record, job->notifications.on_missed,
           {{"FLEETCRON_OUTCOME", "missed"},
            {"FLEETCRON_MISSED_COUNT", std::to_string(event.missed)},
            {"FLEETCRON_MISSED_RUN", std::to_string(event.runs)},
            {"FLEETCRON_LAST_MISSED", format_rfc3339(event.last_missed)}});
}

void Notifier::announce(const NotifiedJob& job, const std::string& key, const FireRecord& record,
                        const std::string& command, std::map<std::string, std::string> variables, bool job_paused) {
  if (!job.notifications.notify.empty()) {
    const std::string body = webhook_document(replica_id_, record, job_paused);
    enqueue(Delivery{Delivery::Kind::webhook, key, job.notifications.notify, body, {}});
  }
  if (command.empty()) return;
  variables.emplace("FLEETCRON_JOB_KEY", key);
  variables.emplace("FLEETCRON_FIRE_KEY", record.fire_key);
  variables.emplace("FLEETCRON_SCHEDULED_AT", format_rfc3339(record.scheduled_at));
  variables.emplace("FLEETCRON_FENCE", std::to_string(record.fence));
  variables.emplace("FLEETCRON_REPLICA", record.replica_id);
  variables.emplace("FLEETCRON_ERROR", record.error);
  variables.emplace("FLEETCRON_OUTPUT_TAIL", record.output_tail);
  CommandSpec spec = job.command;
  spec.command = command;
  spec.input.reset();
  spec.timeout = options_.command_timeout;
  for (const auto& [name, value] : variables) set_variable(spec.environment, name, value);
  enqueue(Delivery{Delivery::Kind::command, key, command, {}, std::move(spec)});
}

void Notifier::enqueue(Delivery delivery) {
  const auto refusal = worker_.push(delivery);
  if (refusal == detail::BoundedWorker<Delivery>::Refusal::none) return;
  metrics_.notification(std::string(to_string(delivery.kind)), "dropped");
  log_.write("warn", "notify-dropped",
             refusal == detail::BoundedWorker<Delivery>::Refusal::full
                 ? fmt::format("{} {} not sent: {} deliveries already wait (the limit)", to_string(delivery.kind),
                               shown_target(delivery), options_.max_queued)
                 : fmt::format("{} {} not sent: the daemon stopped", to_string(delivery.kind), shown_target(delivery)),
             delivery.job_key);
}

std::string Notifier::attempt(const Delivery& delivery, std::stop_token stop) {
  if (delivery.kind == Delivery::Kind::command) {
    const CommandResult result = run_command(delivery.command, stop, [&](std::string_view stream, std::string_view line) {
      log_.write(stream == "stderr" ? "warn" : "info", "notify-output", line, delivery.job_key);
    });
    return result.succeeded() ? std::string() : result.describe();
  }
  const std::string_view type = delivery.kind == Delivery::Kind::webhook ? "application/json" : "text/plain";
  const HttpPostResult result = http_post(delivery.target, delivery.body, type, options_.http_timeout);
  return result.delivered ? std::string() : result.error;
}

void Notifier::deliver(const Delivery& delivery, std::stop_token stop) {
  const std::string kind(to_string(delivery.kind));
  std::string error;
  auto backoff = options_.first_backoff;
  for (int attempt_number = 1; attempt_number <= options_.attempts; ++attempt_number) {
    error = attempt(delivery, stop);
    if (error.empty() || attempt_number == options_.attempts || stop.stop_requested()) break;
    std::unique_lock wait(backoff_mutex_);
    (void)backoff_cv_.wait_for(wait, stop, backoff, [] { return false; });  // woken early by stop()
    if (stop.stop_requested()) break;  // no new attempt once the deadline passed
    backoff *= 2;
  }
  metrics_.notification(kind, error.empty() ? "delivered" : "failed");
  if (!error.empty()) {
    log_.write("warn", "notify-failed", fmt::format("{} {}: {}", kind, shown_target(delivery), error), delivery.job_key);
  }
}

void Notifier::stop(SteadyClock::time_point deadline) {
  // Deliver what waits until the deadline; then end the one in flight and drop the rest.
  for (const auto& delivery : worker_.stop(deadline)) {
    metrics_.notification(std::string(to_string(delivery.kind)), "dropped");
    log_.write("warn", "notify-dropped", fmt::format("{} {} not sent: the daemon stopped", to_string(delivery.kind), shown_target(delivery)),
               delivery.job_key);
  }
}

}  // namespace fleetcron::daemon
