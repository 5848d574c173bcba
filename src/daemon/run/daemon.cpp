#include "daemon/run/daemon.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <iterator>
#include <optional>
#include <random>

#include "core/scheduler/ledger_records.h"
#include "daemon/config/file_watcher.h"
#include "daemon/observe/fire_recorder.h"
#include "daemon/observe/fleet_view.h"
#include "daemon/observe/job_metrics.h"
#include "daemon/http/api_service.h"
#include "daemon/http/http_server.h"
#include "daemon/observe/notifier.h"
#include "daemon/http/status_page.h"
#include "daemon/run/process_runner.h"
#include "fleetcron/backend_error.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/store_clock.h"
#include "fleetcron/time_zone.h"
#include "fleetcron/version.h"

extern char** environ;

namespace fleetcron::daemon {

namespace {

/// How long a stopping daemon keeps delivering queued notifications.
constexpr auto notify_drain = std::chrono::seconds{5};

/// This daemon's name in the fleet state: host, pid and 6 random hex
/// digits (a container's pid is often 1), e.g. "web-1-4242-3fa9c1".
std::string host_name() {
  std::array<char, 256> host{};
  return gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "";
}

std::string replica_name() {
  std::string name = host_name();
  std::replace_if(name.begin(), name.end(), [](char c) { return c <= ' ' || c == 0x7f; }, '-');
  if (name.empty()) name = "fleetcron";
  std::random_device random;
  return fmt::format("{}-{}-{:06x}", name.substr(0, 40), ::getpid(), random() & 0xffffffU);
}

/// Appends `line` to `tail`, keeping its last max_output_tail_bytes.
void keep_tail(std::string& tail, std::string_view line) {
  tail.append(line).push_back('\n');
  if (tail.size() > 2 * max_output_tail_bytes) tail.erase(0, tail.size() - max_output_tail_bytes);
}

}  // namespace

struct Daemon::Runtime {
  JobDefinition job;
};

Daemon::Daemon(Settings settings, LogSink& log) : settings_(std::move(settings)), log_(log) {
  validate(settings_);
  parse_options_ = jobs_parse_options(settings_.seconds, settings_.zone);
  if (settings_.watch) loaded_content_ = watched_content(settings_.jobs_paths);  // before the load: an edit after is seen
  const JobsSources sources = load_sources();
  log_notices(sources);
  keep_base_environment();
  // One name for this replica everywhere: registry, runner, leader.
  const std::string replica_id = settings_.replica_id.empty() ? replica_name() : settings_.replica_id;
  coordination_ = make_coordination(settings_, metrics_, replica_id);
  open_outputs(replica_id);
  if (backend_for(settings_.coordinator).in_process()) {
    log_.write("warn", "memory-coordinator",
               "the memory coordinator coordinates this process only: a second replica would run every fire again "
               "(use --coordinator redis://…, nats://… or postgres://… for a fleet)");
  }
  for (const auto& [event, message] : coordination_.warnings) log_.write("warn", event, message);
  log_catch_up();
  scheduler_ = std::make_unique<Scheduler>(scheduler_options(replica_id));
  for (const JobDefinition* job : sources.jobs()) {
    try {
      add_job(*job);
    } catch (const std::invalid_argument& e) {  // the scheduler's rules: at the job's line, as validate says
      throw std::runtime_error(rule_error(*job, e.what()));
    }
  }
  update_notifications();
  metrics_.jobs_loaded(sources.job_count());
  loaded_ = true;
  start_probe_ = probe_store();
  backend_reachable_ = start_probe_.answered;
  start_threads(replica_id);
}

void Daemon::keep_base_environment() {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    // The coordinator's password is the daemon's, not the jobs'.
    const bool secret = std::any_of(std::begin(password_variables), std::end(password_variables), [&](const char* name) {
      return variable.starts_with(std::string(name) + "=");
    });
    if (!secret) base_environment_.emplace_back(*entry);
  }
}

void Daemon::open_outputs(const std::string& replica_id) {
  if (settings_.output_dir.empty()) return;
  try {
    outputs_ = std::make_unique<RunOutputs>(settings_.output_dir, replica_id);
    outputs_->prune_host({settings_.keep_succeeded, settings_.keep_failed, settings_.history_age});
  } catch (const std::exception& e) {
    log_.write("warn", "output-not-kept",
               fmt::format("runs' output is not kept (fleetcron logs has none of this replica's runs): {}", e.what()));
  }
}

SchedulerOptions Daemon::scheduler_options(const std::string& replica_id) {
  SchedulerOptions options;
  options.zone = parse_options_.zone;
  options.seconds_field = settings_.seconds;
  options.limits.max_concurrent = settings_.max_concurrent;
  options.claimer = coordination_.claimer;
  options.elector = coordination_.elector;
  options.fleet.state = coordination_.fleet_state;
  options.fleet.catch_up_reach = settings_.catch_up;
  options.fleet.catch_up_beyond_dedup_window = settings_.catch_up_beyond_claim_ttl;
  options.fleet.replica_id = replica_id;
  options.fleet.replica.host = host_name();
  options.fleet.replica.pid = ::getpid();
  options.fleet.replica.version = FLEETCRON_VERSION_STRING;
  options.fleet.replica.settings = coordination_.replica_settings;
  options.fleet.ledger = settings_.history > 0;
  if (options.fleet.ledger) options.fleet.ledger_retention = LedgerRetention{settings_.history, settings_.history_age};
  options.on_leadership_lost = effective_leadership_loss(settings_) == LeadershipLoss::cancel
                                   ? LeadershipLossPolicy::cancel
                                   : LeadershipLossPolicy::let_finish;
  // Every metric and log line about fires and runs comes from the events,
  // once: the scheduler does not log them itself.
  options.recorder = std::make_shared<FireRecorder>(metrics_, log_, [this](const std::string& key) { return command_of(key); });
  options.log_events = false;
  notifier_ = std::make_shared<Notifier>(metrics_, log_, options.fleet.replica_id);
  options.observers.push_back(notifier_);
  options.logger = [this](LogLevel level, std::string_view message) {
    static constexpr const char* names[] = {"debug", "info", "warn", "error"};
    log_.write(names[static_cast<int>(level)], "scheduler", message);
  };
  return options;
}

void Daemon::start_threads(const std::string& replica_id) {
  // Before any thread of ours: a bad token file or a port taken throws
  // here, and the caller exits 2.
  if (!settings_.http.empty()) start_http(replica_id);
  readiness_ = std::thread([this] { check_backend_loop(); });
  scheduling_lag_ = std::make_unique<SchedulingLag>(
      [this](std::chrono::nanoseconds lateness) { metrics_.scheduling_lag(std::chrono::duration<double>(lateness).count()); },
      [this](std::chrono::nanoseconds worst, std::chrono::nanoseconds window) {
        log_.write("warn", "scheduling-lag",
                   fmt::format("the host woke this daemon up to {} ms late in the last {} s: fires start late by as "
                               "much (docs/reliability.md, \"A busy host\")",
                               std::chrono::duration_cast<std::chrono::milliseconds>(worst).count(),
                               std::chrono::duration_cast<std::chrono::seconds>(window).count()));
      });
  if (!settings_.http.empty() && coordination_.fleet_state && settings_.job_metrics != JobMetricsScope::none) {
    job_metrics_ = std::thread([this] { job_metrics_loop(); });
  }
}

void Daemon::start_http(const std::string& replica_id) {
  ApiSources sources;
  sources.fleet_state = coordination_.fleet_state;
  sources.local_jobs = [this] { return local_jobs(); };
  sources.leader = [this, replica_id] {
    if (!backend_for(settings_.coordinator).in_process()) return read_store_view(settings_, false).leader;
    LeaderView leader;  // the memory lease's holder is this process
    if (coordination_.elector && coordination_.elector->is_leader().status == Leadership::Status::leader) leader.holder = replica_id;
    return leader;
  };
  sources.leads = [this] {
    return coordination_.elector && coordination_.elector->is_leader().status == Leadership::Status::leader;
  };
  sources.replica_id = replica_id;
  sources.coordinator = coordination_.description;
  sources.output_dir = outputs_ ? settings_.output_dir : std::string();
  if (!settings_.api_token_file.empty()) sources.token = read_secret_file(settings_.api_token_file, "--api-token-file");
  const bool writable = !sources.token.empty();
  api_ = std::make_unique<ApiService>(std::move(sources));
  HttpRoutes routes;
  routes.metrics = [this] {
    if (const auto offset = coordination_.diagnostics->clock_offset()) {
      metrics_.clock_offset(std::chrono::duration<double>(offset->offset).count());
    }
    metrics_.log_lines_lost(log_.lost_lines());
    metrics_.log_lines_dropped(log_.dropped_lines());
    return metrics_.render();
  };
  routes.ready = [this] { return ready(); };
  routes.api = [this](const HttpRequest& request) { return api_->handle(request); };
  routes.page = [] { return status_page(); };
  http_server_ = std::make_unique<HttpServer>(settings_.http, std::move(routes));
  log_.write("info", "http-listening",
             fmt::format("http://{}/ (status page), /api/v1/ ({}), /metrics, /healthz, /readyz", settings_.http,
                         writable ? "controls need the bearer token" : "read-only: no --api-token-file"));
}

std::vector<LocalJob> Daemon::local_jobs() {
  std::vector<LocalJob> out;
  std::lock_guard guard(jobs_mutex_);
  out.reserve(jobs_.size());
  for (const auto& [key, entry] : jobs_) {
    const JobDefinition& job = entry.second->job;
    out.push_back(LocalJob{key, job.scope, job.at_start, job.schedule});
  }
  return out;
}

Daemon::~Daemon() {
  scheduling_lag_.reset();
  watcher_.reset();
  http_server_.reset();
  {
    std::lock_guard guard(readiness_mutex_);
    readiness_stop_ = true;
  }
  stopping_reads_ = true;
  readiness_cv_.notify_all();
  if (readiness_.joinable()) readiness_.join();
  if (job_metrics_.joinable()) job_metrics_.join();
  // Jobs still running use this object's members: end them first, before
  // any member goes (the runner's worst case is kill_grace plus 1 s of output).
  if (scheduler_) scheduler_->stop(std::chrono::steady_clock::now() + settings_.kill_grace + std::chrono::seconds{3});
  scheduler_.reset();
}

void Daemon::log_catch_up() {
  if (settings_.catch_up <= std::chrono::nanoseconds::zero()) {
    log_.write("info", "catch-up", "off (--catch-up 0): a restarted fleet does not run what it missed");
  } else if (backend_for(settings_.coordinator).in_process()) {
    log_.write("info", "catch-up", "not across restarts on the memory coordinator: its state ends with the process");
  } else if (!coordination_.fleet_state) {
    log_.write("info", "catch-up", "off: the fleet keeps no state (--catch-up 0 and --history 0)");
  } else if (!settings_.catch_up_beyond_claim_ttl && !coordination_.claimer) {
    log_.write("info", "catch-up",
               "leader mode has no claims to keep a caught-up fire once: a restarted fleet catches up only with "
               "--catch-up-beyond-claim-ttl (a fleet without libtnb/cron replicas)");
  } else if (!settings_.catch_up_beyond_claim_ttl) {
    log_.write("info", "catch-up",
               fmt::format("fires the whole fleet missed are caught up within the claims' dedup window ({}) only; "
                           "--catch-up-beyond-claim-ttl reaches back {} in a fleet without libtnb/cron replicas",
                           format_duration(coordination_.claimer->dedup_window()), format_duration(settings_.catch_up)));
  } else {
    log_.write("info", "catch-up", fmt::format("fires the whole fleet missed are caught up {} back, once across the fleet",
                                               format_duration(settings_.catch_up)));
  }
}

bool Daemon::ready() const { return loaded_ && backend_reachable_.load(); }

std::optional<StoreConfig> Daemon::check_store_config(bool running) {
  std::lock_guard guard(config_check_mutex_);
  std::optional<StoreConfig> check = coordination_.diagnostics->check_config();
  if (!check || !check->answered) return check;  // nothing to check; unreachable: the next reconnect reads it
  metrics_.backend_config(check->value, check->safe);
  const std::string state = check->safe ? "ok" : check->value.empty() ? "unreadable" : check->value;
  if (state != config_state_) {
    config_state_ = state;
    log_.write(check->safe ? "info" : "warn", "backend-config", check->description);
  }
  if (settings_.require_noeviction && !check->safe && !config_refused_.exchange(true)) {
    log_.write("error", "backend-config", fmt::format("--require-noeviction: {}: {}", running ? "stopping" : "refusing to run",
                                                      check->description));
    if (running) ::kill(::getpid(), SIGTERM);  // run() stops as for SIGTERM, then exits 1
  }
  return check;
}

void Daemon::job_metrics_loop() {
  std::unique_lock lock(readiness_mutex_);
  bool failing = false;
  std::chrono::nanoseconds period = std::chrono::seconds{1};  // the first read: once the jobs started
  StoreClock store_clock(*coordination_.fleet_state, system_clock());
  while (!readiness_cv_.wait_for(lock, period, [this] { return readiness_stop_; })) {
    lock.unlock();
    const auto read_started = std::chrono::steady_clock::now();
    try {
      const Instant at = store_clock.now();
      const auto view = read_fleet_view(*coordination_.fleet_state, at, [this] { return stopping_reads_.load(); });
      if (!view) break;  // stopping: 100,000 ledger reads would hold the shutdown for seconds
      metrics_.fleet_jobs(render_job_metrics(*view, settings_.job_metrics),
                          std::chrono::duration<double>(at.time_since_epoch()).count());
      if (failing) log_.write("info", "job-metrics", "the fleet state is readable again");
      failing = false;
    } catch (const std::exception& e) {
      metrics_.fleet_jobs_failed();
      if (!failing) log_.write("warn", "job-metrics", std::string("the per-job metrics keep their last values: ") + e.what());
      failing = true;
    }
    // A read of every job's ledger (100,000 jobs: seconds) takes the store
    // a fifth of the time at most: the next one waits four times as long.
    period = std::max<std::chrono::nanoseconds>(job_metrics_interval, 4 * (std::chrono::steady_clock::now() - read_started));
    lock.lock();
  }
}

bool Daemon::replica_id_free() {
  if (settings_.replica_id.empty() || !coordination_.fleet_state || backend_for(settings_.coordinator).in_process()) {
    return true;
  }
  // A record of this id from another process (another start time): a
  // predecessor that died (its beat stands still; the registry reports its
  // runs lost), or a live replica given the same id (its beat moves).
  // Records expire on the store's clock: read them at its time, not this host's.
  StoreClock store_clock(*coordination_.fleet_state, system_clock());
  const auto beat_of_namesake = [&]() -> std::optional<Instant> {
    const RegistryRead read = coordination_.fleet_state->read_replicas(store_clock.now());
    if (read.status != RegistryRead::Status::found) return std::nullopt;  // unreadable: the scheduler fails closed anyway
    for (const auto& record : read.replicas) {
      if (record.replica.replica_id == settings_.replica_id) return record.beat;
    }
    return std::nullopt;
  };
  const auto first = beat_of_namesake();
  if (!first) return true;
  log_.write("info", "replica-id", fmt::format("replica id {} has a record in the registry: waiting up to {} to see "
                                               "whether it still beats",
                                               settings_.replica_id, format_duration(2 * registry_heartbeat + std::chrono::seconds{1})));
  const auto deadline = std::chrono::steady_clock::now() + 2 * registry_heartbeat + std::chrono::seconds{1};
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{250});
    const auto now = beat_of_namesake();
    if (!now) return true;  // withdrawn or expired
    if (*now != *first) {
      log_.write("error", "replica-id",
                 fmt::format("replica id {} is in use by a live replica (its record beats): replica ids must be unique "
                             "among the live replicas; not starting",
                             settings_.replica_id));
      return false;
    }
  }
  return true;  // a predecessor that died: the registry reports its runs lost
}

Daemon::StoreProbe Daemon::probe_store() const {
  try {
    coordination_.diagnostics->ping();
    return {true, false, {}};
  } catch (const BackendError& e) {
    const bool refused = e.kind() == BackendError::Kind::auth || e.kind() == BackendError::Kind::config;
    return {false, refused, e.what()};
  } catch (const std::exception& e) {
    return {false, false, e.what()};
  }
}

void Daemon::wait_for_first_answer(bool answered, bool& ever_answered, std::chrono::steady_clock::time_point started) {
  ever_answered = ever_answered || answered;
  if (ever_answered || settings_.store_wait <= std::chrono::nanoseconds::zero()) return;
  if (std::chrono::steady_clock::now() - started < settings_.store_wait || store_wait_expired_.exchange(true)) return;
  log_.write("error", "store-wait",
             fmt::format("{} has not answered in the {} since the start (--store-wait): stopping, to exit 1 so that "
                         "the service manager sees it",
                         coordination_.description, format_duration(settings_.store_wait)));
  ::kill(::getpid(), SIGTERM);  // run() stops as for SIGTERM, then exits 1
}

void Daemon::check_backend_loop() {
  std::unique_lock lock(readiness_mutex_);
  bool was_reachable = false;
  bool first_check = true;
  bool ever_answered = backend_reachable_;
  const auto started = std::chrono::steady_clock::now();
  auto config_checked = std::chrono::steady_clock::time_point{};
  std::string last_error;
  while (!readiness_cv_.wait_for(lock, std::chrono::seconds{1}, [this] { return readiness_stop_; })) {
    lock.unlock();
    const StoreProbe probe = probe_store();
    const bool reachable = probe.answered;
    backend_reachable_ = reachable;
    // One line per change, for every backend alike, and one at the first
    // check if it does not answer; a refusal says what it refuses.
    if (reachable != was_reachable || (first_check && !reachable) || (probe.refused && probe.error != last_error)) {
      log_.write(reachable ? "info" : "error", reachable ? "backend-reachable" : "backend-unreachable",
                 reachable ? fmt::format("{} answers", coordination_.description)
                 : probe.refused
                     ? fmt::format("{} refuses this daemon's configuration: {}; fires fail closed until it is fixed",
                                   coordination_.description, probe.error)
                     : fmt::format("{} does not answer; fires fail closed until it does ({})", coordination_.description,
                                   probe.error));
    }
    last_error = probe.error;
    first_check = false;
    wait_for_first_answer(reachable, ever_answered, started);
    // The eviction policy: at every (re)connect, and every minute (CONFIG
    // SET can change it at any time).
    const auto now = std::chrono::steady_clock::now();
    if (reachable && (!was_reachable || now - config_checked >= std::chrono::minutes{1})) {
      const auto check = check_store_config(true);
      if (check && check->answered) config_checked = now;
    }
    was_reachable = reachable;
    // As a container's init, orphaned grandchildren of the jobs are ours.
    if (getpid() == 1) (void)reap_orphans();
    lock.lock();
  }
}

JobsSources Daemon::load_sources() const {
  return load_jobs_sources(settings_.jobs_paths, parse_options_, settings_.job_defaults, settings_.crontab_format);
}

void Daemon::log_notices(const JobsSources& sources) {
  for (const auto& file : sources.files) {
    for (const auto& notice : file.notices) {
      log_.write("warn", "unsupported-line", fmt::format("{}:{}: {}", file.path, notice.line, notice.message));
    }
  }
  for (const auto& skipped : sources.skipped) {
    log_.write("info", "file-skipped", fmt::format("{}: not read: {}", skipped.path, skipped.reason));
  }
}

void Daemon::add_job(const JobDefinition& job) {
  auto runtime = std::make_shared<Runtime>();
  runtime->job = job;
  if (!job.at_start && !job.schedule->next(Instant{std::chrono::system_clock::now().time_since_epoch()})) {
    log_.write("warn", "job-never-fires", fmt::format("{}:{}: \"{}\" never fires: no instant matches after now", job.file,
                                                       job.line, job.spec), job.key);
  }
  EntryOptions options = entry_options(job);
  if (job.history && settings_.history == 0) {
    log_.write("warn", "history-ignored",
               fmt::format("{}:{}: history={} has no effect: this daemon keeps no ledger (--history 0)", job.file,
                           job.line, *job.history),
               job.key);
  } else if (job.history) {
    options.ledger_retention = LedgerRetention{*job.history, settings_.history_age};
  }
  if (job.pause_on_failure && !coordination_.fleet_state) {
    log_.write("warn", "pause-local",
               fmt::format("{}:{}: pause-on-failure=yes pauses this job in this daemon alone: it keeps no fleet state "
                           "(--catch-up 0 --history 0), so no resume reaches the pause; only a restart clears it",
                           job.file, job.line),
               job.key);
  }
  const EntryId id = scheduler_->add(job.schedule, make_job(runtime), options);
  std::lock_guard guard(jobs_mutex_);
  jobs_[job.key] = {id, runtime};
}


CommandSpec Daemon::command_spec(const JobDefinition& job) const {
  CommandSpec spec;
  spec.working_directory = job.working_directory;
  spec.run_as = job.run_as;
  spec.kill_grace = settings_.kill_grace;
  spec.max_output_bytes = settings_.max_output_bytes;
  spec.environment = base_environment_;
  auto set = [&](const std::string& name, const std::string& value) { set_variable(spec.environment, name, value); };
  if (job.run_as) {  // as cron does for a user's crontab; the file's lines may override them
    set("HOME", job.run_as->home);
    set("USER", job.run_as->name);
    set("LOGNAME", job.run_as->name);
  }
  for (const auto& [name, value] : job.environment) {
    set(name, value);
    if (name == "SHELL") spec.shell = value;
  }
  return spec;
}

void Daemon::update_notifications() {
  std::map<std::string, NotifiedJob> notified;
  {
    std::lock_guard guard(jobs_mutex_);
    for (const auto& [key, entry] : jobs_) {
      const JobDefinition& job = entry.second->job;
      const bool fleet_scoped = !backend_for(settings_.coordinator).in_process() && job.scope == JobScope::fleet && !job.at_start;
      if (job.notifications.any()) notified.emplace(key, NotifiedJob{job.notifications, fleet_scoped, command_spec(job)});
    }
  }
  notifier_->set_jobs(std::move(notified));
}

fleetcron::Job Daemon::make_job(std::shared_ptr<Runtime> runtime) {
  return [this, runtime](const FireContext& fire, std::stop_token stop) { run_job(*runtime, fire, stop); };
}

void Daemon::run_job(Runtime& runtime, const FireContext& fire, std::stop_token stop) {
  // Metrics and the run-started/run-finished lines come from the events
  // (FireRecorder); the attempt timeout is the scheduler's, which asks the
  // command to stop through `stop`.
  const JobDefinition& job = runtime.job;
  CommandSpec spec = command_spec(job);
  spec.command = job.command;
  spec.input = job.input;
  auto set = [&](const std::string& name, const std::string& value) { set_variable(spec.environment, name, value); };
  set("FLEETCRON_JOB_KEY", job.key);
  set("FLEETCRON_FIRE_KEY", fire.fire_key);
  set("FLEETCRON_SCHEDULED_AT", format_rfc3339(fire.scheduled_at));
  set("FLEETCRON_FENCE", std::to_string(fire.fence));
  if (fire.recovery > 0) {  // a re-run of a lost run: the job can deduplicate on the lost run's fence
    set("FLEETCRON_RECOVERED_FENCE", std::to_string(fire.recovered_fence));
    set("FLEETCRON_RECOVERY", std::to_string(fire.recovery));
  }
  set("FLEETCRON_ATTEMPT", std::to_string(fire.attempt));
  std::string tail;  // the output's last bytes, both streams as they came, for the ledger
  std::unique_ptr<OutputWriter> kept = open_output(job, fire);  // all of it, for `fleetcron logs`
  const CommandResult result = run_command(spec, stop, [&](std::string_view stream, std::string_view line) {
    log_.write(stream == "stderr" ? "warn" : "info", stream == "stderr" ? "stderr" : "stdout", line, job.key, fire.fire_key);
    keep_tail(tail, line);
    if (kept) kept->line(line);
  });
  if (fire.details != nullptr) {
    fire.details->output_tail = std::move(tail);
    fire.details->exit_status.reset();
    fire.details->signal.reset();
    if (result.started && result.signal != 0) fire.details->signal = result.signal;
    if (result.started && result.signal == 0) fire.details->exit_status = result.exit_code;
  }
  if (result.dropped_bytes > 0) {
    const std::string dropped = fmt::format("{} bytes of output dropped (limit {} bytes per run)", result.dropped_bytes,
                                            settings_.max_output_bytes);
    log_.write("warn", "output-dropped", dropped, job.key, fire.fire_key);
    if (kept) kept->line("[fleetcron: " + dropped + "]");
  }
  close_output(std::move(kept), job, fire, result.succeeded());
  if (!result.succeeded()) throw std::runtime_error(result.describe());  // failed: retries apply
}

std::unique_ptr<OutputWriter> Daemon::open_output(const JobDefinition& job, const FireContext& fire) {
  if (!outputs_) return nullptr;
  // Under the key the ledger records it by (a lost run's re-run has its own).
  return outputs_->open(job.key, detail::recovery_fire_key(fire.fire_key, fire.recovery), fire.attempt);
}

void Daemon::close_output(std::unique_ptr<OutputWriter> kept, const JobDefinition& job, const FireContext& fire,
                          bool succeeded) {
  if (!kept) return;
  kept->finish(succeeded);
  if (!kept->error().empty()) {
    log_.write("warn", "output-not-kept", "this run's output is not (all) kept: " + kept->error(), job.key, fire.fire_key);
  }
  // After the last attempt only: a failed attempt waiting for its retry is
  // no failed run yet (keep-failed=0 would drop what the retry appends to).
  if (!succeeded && fire.attempt <= job.retries) return;
  const OutputRetention retention{job.keep_succeeded.value_or(settings_.keep_succeeded),
                                  job.keep_failed.value_or(settings_.keep_failed), settings_.history_age};
  outputs_->prune(job.key, retention);
}

std::string Daemon::command_of(const std::string& key) {
  std::lock_guard guard(jobs_mutex_);
  const auto it = jobs_.find(key);
  return it == jobs_.end() ? std::string() : it->second.second->job.command;
}

bool Daemon::reload() {
  std::lock_guard guard(reload_mutex_);
  try {
    const JobsSources sources = load_sources();
    log_notices(sources);
    return apply_reload(sources);
  } catch (const std::exception& e) {
    metrics_.reloads(false);
    log_.write("error", "reload-failed", std::string(e.what()) + "; keeping the jobs loaded before");
    return false;
  }
}

bool Daemon::apply_reload(const JobsSources& sources) {
  std::size_t added = 0, removed = 0, changed = 0;
  std::map<std::string, const JobDefinition*> wanted;
  for (const JobDefinition* job : sources.jobs()) wanted[job->key] = job;
  std::vector<std::pair<EntryId, std::string>> to_remove;
  std::vector<const JobDefinition*> to_add;
  {
    std::lock_guard guard(jobs_mutex_);
    for (const auto& [key, current] : jobs_) {
      const auto it = wanted.find(key);
      if (it == wanted.end()) {
        to_remove.emplace_back(current.first, key);
        ++removed;
      } else if (!current.second->job.same_definition(*it->second)) {
        to_remove.emplace_back(current.first, key);
        to_add.push_back(it->second);
        ++changed;
      }
    }
    for (const auto& [key, job] : wanted) {
      if (!jobs_.contains(key)) {
        to_add.push_back(job);
        ++added;
      }
    }
  }
  // Every new entry is checked against every rule add() applies before
  // anything is removed or stopped: a refused reload changes nothing.
  for (const JobDefinition* job : to_add) {
    try {
      scheduler_->check(job->schedule, entry_options(*job));
    } catch (const std::exception& e) {
      throw std::runtime_error(rule_error(*job, e.what()));
    }
  }
  {
    std::lock_guard guard(jobs_mutex_);
    for (const auto& [id, key] : to_remove) jobs_.erase(key);
  }
  for (const auto& [id, key] : to_remove) scheduler_->remove(id);  // a running run gets stop requested
  for (const JobDefinition* job : to_add) add_job(*job);
  update_notifications();
  metrics_.jobs_loaded(sources.job_count());
  metrics_.reloads(true);
  log_.write("info", "reloaded",
             fmt::format("{} jobs: {} added, {} removed, {} changed", sources.job_count(), added, removed, changed));
  return true;
}

void Daemon::run_at_start_jobs() {
  std::vector<std::pair<EntryId, std::string>> at_start;
  {
    std::lock_guard guard(jobs_mutex_);
    for (const auto& [key, job] : jobs_) {
      if (job.second->job.at_start) at_start.emplace_back(job.first, key);
    }
  }
  for (const auto& [id, key] : at_start) {
    try {
      scheduler_->trigger(id);  // on this replica, uncoordinated: Vixie cron's @reboot
      log_.write("info", "at-start", "@reboot: run once at daemon start, on this replica", key);
    } catch (const std::exception& e) {
      log_.write("error", "at-start", std::string("@reboot: could not start: ") + e.what(), key);
    }
  }
}

bool Daemon::check_schema() {
  // The daemon never runs DDL: `fleetcron migrate` does. A server down at
  // start is not refused (its claims fail closed until it answers).
  try {
    const std::vector<std::string> missing = coordination_.diagnostics->missing_schema();
    for (const auto& line : missing) log_.write("error", "backend-schema", line);
    if (!missing.empty()) {
      log_.write("error", "backend-schema",
                 fmt::format("{} schema object(s) missing on {}: run `fleetcron migrate --coordinator …` first",
                             missing.size(), coordination_.description));
    }
    return missing.empty();
  } catch (const AuthError& e) {
    // Not a server that is down: every claim would fail until restarted.
    log_.write("error", "backend-schema", std::string("cannot check the schema: ") + e.what());
    return false;
  } catch (const std::exception& e) {
    log_.write("warn", "backend-schema", std::string("could not check the schema at start: ") + e.what());
    return true;
  }
}

int Daemon::run() {
  if (start_probe_.refused) {
    log_.write("error", "store-refused",
               fmt::format("{}: not starting: this is the daemon's configuration (a password, a user's rights, a "
                           "database, a certificate), not an outage: fix it and start again",
                           start_probe_.error));
    return 2;
  }
  if (!replica_id_free()) return 2;
  // Refused before anything runs when the server answers; a server down
  // at start is checked when it comes up.
  (void)check_store_config(false);
  if (config_refused_) return 2;
  if (!check_schema()) return 2;
  scheduler_->start();
  log_.write("info", "started",
             fmt::format("{} jobs from {}; coordinator {}, coordination {}", scheduler_->size(),
                         fmt::join(settings_.jobs_paths, ", "), coordination_.description,
                         to_string(settings_.coordination)));
  run_at_start_jobs();
  if (settings_.watch) {
    const std::string watched = fmt::format("{}", fmt::join(settings_.jobs_paths, ", "));
    watcher_ = std::make_unique<FileWatcher>(settings_.jobs_paths, [this, watched] {
      log_.write("info", "reload-requested", fmt::format("--watch: {} changed", watched));
      reload();
    });
    log_.write("info", "watching", fmt::format("{}: reloaded when they change", watched));
    // An edit between the load and the watcher's start is no event: compare.
    if (watched_content(settings_.jobs_paths) != loaded_content_) {
      log_.write("info", "reload-requested", fmt::format("--watch: {} changed since the load", watched));
      reload();
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  while (true) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal == SIGHUP) {
      log_.write("info", "reload-requested", "SIGHUP");
      reload();
      continue;
    }
    watcher_.reset();  // no reload while stopping
    log_.write("info", "stopping", fmt::format("{}: draining running jobs for up to {}", signal == SIGINT ? "SIGINT" : "SIGTERM",
                                             format_duration(settings_.shutdown_grace)));
    // Let running jobs finish within the grace; then stop (SIGTERM to
    // what still runs, SIGKILL after kill_grace). stop() resigns leadership.
    const auto deadline = std::chrono::steady_clock::now() + settings_.shutdown_grace;
    bool clean = scheduler_->drain(deadline);
    if (!clean) clean = scheduler_->stop(std::chrono::steady_clock::now() + settings_.kill_grace + std::chrono::seconds{3});
    notifier_->stop(std::chrono::steady_clock::now() + notify_drain);  // the last runs' notifications
    log_.write("info", "stopped", clean ? "all runs finished" : "some runs did not end in time");
    return config_refused_ || store_wait_expired_ ? 1 : 0;
  }
}

}  // namespace fleetcron::daemon
