// `fleetcron run`: one jobs file, a scheduler, a coordination backend,
// processes for the runs, signals for stop and reload, metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <condition_variable>

#include "daemon/run/coordination_setup.h"
#include "daemon/config/jobs_file.h"
#include "daemon/config/jobs_sources.h"
#include "daemon/observe/log_sink.h"
#include "daemon/observe/metrics.h"
#include "daemon/run/run_output.h"
#include "daemon/observe/scheduling_lag.h"
#include "daemon/config/settings.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::daemon {

class ApiService;
class Notifier;
struct CommandSpec;
class FileWatcher;
class HttpServer;
struct LocalJob;

class Daemon {
 public:
  /// Loads the jobs file and sets everything up; throws JobsFileError,
  /// SettingsError or std::invalid_argument (the caller prints it, exits 2).
  Daemon(Settings settings, LogSink& log);
  ~Daemon();

  /// Starts, then waits for SIGTERM/SIGINT (graceful stop) and SIGHUP
  /// (reload). The calling thread must have those signals blocked (main()
  /// blocks them before any thread starts). Returns the exit code.
  int run();

  /// Reloads the jobs file: added, removed and changed jobs take effect,
  /// unchanged ones keep their state; an invalid file keeps the old one.
  bool reload();

  [[nodiscard]] Metrics& metrics() noexcept { return metrics_; }
  [[nodiscard]] bool ready() const;

 private:
  struct Runtime;  // one job: its definition
  void add_job(const JobDefinition& job);
  /// MAILTO= and other lines accepted but not acted on: one warning each.
  [[nodiscard]] JobsSources load_sources() const;
  void log_notices(const JobsSources& sources);
  /// Triggers each @reboot job once, at start (not at a reload).
  void run_at_start_jobs();
  /// The listener of --http: metrics, health, the API and the page.
  void start_http(const std::string& replica_id);
  // The constructor's parts: the jobs' environment (the daemon's, without
  // the coordinator's password); the runs' output folder (a warning if it
  // cannot be kept); the scheduler's options; the threads beside it.
  void keep_base_environment();
  void open_outputs(const std::string& replica_id);
  [[nodiscard]] SchedulerOptions scheduler_options(const std::string& replica_id);
  void start_threads(const std::string& replica_id);
  [[nodiscard]] std::vector<LocalJob> local_jobs();
  /// How the job's commands run: shell, environment, directory, account.
  [[nodiscard]] CommandSpec command_spec(const JobDefinition& job) const;
  /// Gives the notifier the jobs that notify (after a load or reload).
  void update_notifications();
  /// Checks every new or changed job, then applies the file; throws (and
  /// changes nothing) if one is refused.
  bool apply_reload(const JobsSources& sources);
  fleetcron::Job make_job(std::shared_ptr<Runtime> runtime);
  void run_job(Runtime& runtime, const FireContext& fire, std::stop_token stop);
  /// The command of the job with `key` ("" if none), for the log.
  std::string command_of(const std::string& key);

  Settings settings_;
  LogSink& log_;
  Metrics metrics_;
  ParseOptions parse_options_;
  Coordination coordination_;
  std::unique_ptr<Scheduler> scheduler_;
  std::mutex jobs_mutex_;  // guards jobs_
  std::map<std::string, std::pair<EntryId, std::shared_ptr<Runtime>>> jobs_;  // by key
  std::atomic<bool> loaded_{false};
  // Every second: the backend check /readyz answers from (not a round trip
  // per request) and, as PID 1, reaping orphaned grandchildren of the jobs.
  void check_backend_loop();
  /// Reads the fleet state for the per-job metrics every job_metrics_interval.
  void job_metrics_loop();
  /// Says at start how far catch-up across restarts reaches, or why not.
  void log_catch_up();
  /// Reads the store's configuration (Redis: its maxmemory-policy),
  /// exports it, logs a change; under --require-noeviction an unsafe one
  /// stops the daemon (exit 1). Returns it (nullopt: nothing to check).
  /// `running`: the scheduler runs (stop it with SIGTERM), else run()
  /// has not started it yet (it returns 2).
  std::optional<StoreConfig> check_store_config(bool running);
  /// Logs each schema object the store lacks (PostgreSQL's tables);
  /// false if any is missing.
  bool check_schema();
  std::mutex config_check_mutex_;        // one check at a time: guards config_state_
  std::string config_state_;             // the last one logged
  std::atomic<bool> config_refused_{false};
  std::atomic<bool> store_wait_expired_{false};  // --store-wait passed without an answer: run() exits 1
  /// One look at the store: whether it answered, else why, and whether it
  /// refused this configuration for good (a password, a database, a
  /// certificate) rather than being out of reach.
  struct StoreProbe {
    bool answered = false;
    bool refused = false;
    std::string error;
  };
  [[nodiscard]] StoreProbe probe_store() const;
  /// --replica-id: false (after logging why) if a live replica already
  /// uses the id; waits up to two heartbeats to tell it from a dead
  /// predecessor's record.
  [[nodiscard]] bool replica_id_free();
  static constexpr std::chrono::seconds registry_heartbeat{5};  // SchedulerOptions' default, which the daemon keeps
  /// --store-wait: stops the daemon (exit 1) once the store has not
  /// answered for that long since the start.
  void wait_for_first_answer(bool answered, bool& ever_answered, std::chrono::steady_clock::time_point started);
  StoreProbe start_probe_;
  std::optional<std::string> loaded_content_;  // --watch: the files as the load read them  // the constructor's: run() refuses to start on a refusal
  std::atomic<bool> backend_reachable_{false};
  std::mutex readiness_mutex_;  // guards readiness_stop_
  std::condition_variable readiness_cv_;
  bool readiness_stop_ = false;
  std::atomic<bool> stopping_reads_{false};  // set with readiness_stop_: a read of every ledger ends early
  std::thread readiness_;
  std::thread job_metrics_;  // with --metrics and a fleet state
  std::unique_ptr<SchedulingLag> scheduling_lag_;  // the host's lateness: metric and log
  std::unique_ptr<ApiService> api_;
  std::shared_ptr<Notifier> notifier_;  // an observer of the scheduler
  std::unique_ptr<HttpServer> http_server_;
  std::mutex reload_mutex_;  // one reload at a time: SIGHUP and --watch
  std::unique_ptr<FileWatcher> watcher_;
  std::vector<std::string> base_environment_;
  std::unique_ptr<RunOutputs> outputs_;  // null: runs' output is not kept (--output-dir none, or it failed)
  /// Opens the file a run's output goes to; null when none is kept.
  std::unique_ptr<OutputWriter> open_output(const JobDefinition& job, const FireContext& fire);
  /// Closes it, prunes the job's older runs, logs a write that failed.
  void close_output(std::unique_ptr<OutputWriter> kept, const JobDefinition& job, const FireContext& fire, bool succeeded);
};

}  // namespace fleetcron::daemon
