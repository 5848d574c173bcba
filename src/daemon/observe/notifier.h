// Notifications (docs/daemon.md#notifications): on-failure=, on-lost= and
// on-missed= commands, notify= webhooks and ping= dead-man pings, sent by
// the replica that ran the fire (or found it lost, or decided it missed),
// so one fire gives one notification across the fleet. An observer of the
// scheduler's events: it only builds deliveries and queues them; one
// worker thread delivers them in order, with retries and backoff, off the
// scheduling path. A failed or dropped delivery is logged and counted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/support/bounded_worker.h"
#include "daemon/observe/job_notifications.h"
#include "daemon/observe/log_sink.h"
#include "daemon/observe/metrics.h"
#include "daemon/run/process_runner.h"
#include "fleetcron/events.h"
#include "fleetcron/fire_record.h"

namespace fleetcron::daemon {

/// Checked when a Notifier is made: std::invalid_argument naming the field.
struct NotifierOptions {
  std::size_t max_queued = 1000;  ///< deliveries waiting (1 to 100,000); beyond, new ones are dropped
  int attempts = 4;               ///< per delivery: the first and 3 retries (1 to 100)
  std::chrono::milliseconds first_backoff{1000};  ///< doubled after each failed attempt
  std::chrono::milliseconds http_timeout{5000};   ///< connect, each read and write
  std::chrono::milliseconds command_timeout{60'000};
};

/// How a job's notification commands run: as its runs do (shell,
/// environment, directory, account).
struct NotifiedJob {
  JobNotifications notifications;
  /// Run once across a fleet of replicas (not scope=replica, not @reboot,
  /// not the memory coordinator): its misses are notified from catch-up only.
  bool fleet_scoped = false;
  CommandSpec command;  // shell, environment, working_directory, run_as; command unset
};

/// One notification to send.
struct Delivery {
  enum class Kind { command, webhook, ping };
  Kind kind = Kind::command;
  std::string job_key;
  std::string target;  // the command, or the URL
  std::string body;    // the webhook's JSON
  CommandSpec command;
};
[[nodiscard]] std::string_view to_string(Delivery::Kind kind) noexcept;

class Notifier final : public Observer {
 public:
  /// `replica_id` names this replica in the records it sends.
  Notifier(Metrics& metrics, LogSink& log, std::string replica_id, NotifierOptions options = {});
  ~Notifier() override;  // stop(now + 5 s) if not stopped
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  /// The jobs that notify, by key (replaced whole at load and reload).
  void set_jobs(std::map<std::string, NotifiedJob> jobs);
  void on_event(const Event& event) override;
  /// Delivers what is queued until `deadline`, then drops the rest (logged).
  void stop(std::chrono::steady_clock::time_point deadline);

 private:
  void completed(const JobCompletedEvent& event);
  void lost(const LostFireEvent& event);
  void missed(const MissedFireEvent& event);
  /// The commands and webhook for a failure, loss or miss, with the
  /// record as the webhook's body and the command's variables;
  /// `job_paused`: the failure paused the job (pause-on-failure).
  void announce(const NotifiedJob& job, const std::string& key, const FireRecord& record, const std::string& command,
                std::map<std::string, std::string> variables, bool job_paused = false);
  /// A copy of the job's settings (set_jobs may replace them meanwhile).
  [[nodiscard]] std::optional<NotifiedJob> job_of(const std::string& key);
  void enqueue(Delivery delivery);
  /// On the worker thread: the attempts, with backoff, until one succeeds
  /// or `stop` is requested (stop()'s deadline).
  void deliver(const Delivery& delivery, std::stop_token stop);
  /// One attempt; "" when delivered, else why not.
  std::string attempt(const Delivery& delivery, std::stop_token stop);

  Metrics& metrics_;
  LogSink& log_;
  std::string replica_id_;
  NotifierOptions options_;
  std::mutex mutex_;  // guards jobs_
  std::map<std::string, NotifiedJob> jobs_;
  std::mutex backoff_mutex_;  // the retries' waits, which stop() cuts short
  std::condition_variable_any backoff_cv_;
  detail::BoundedWorker<Delivery> worker_;  // last: its thread uses the members above
};

}  // namespace fleetcron::daemon
