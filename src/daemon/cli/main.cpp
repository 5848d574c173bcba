// The fleetcron program. The only translation unit that includes CLI11.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "daemon/cli/commands.h"
#include "daemon/run/daemon.h"
#include "daemon/cli/next_command.h"
#include "fleetcron/duration.h"
#include "fleetcron/nats/build_info.h"
#include "fleetcron/postgres/build_info.h"
#include "fleetcron/redis/build_info.h"
#include "fleetcron/version.h"

namespace {

using fleetcron::daemon::Settings;

constexpr int exit_usage = 2;
constexpr int exit_failure = 1;

void add_next_command(CLI::App& app, fleetcron::daemon::NextCommandOptions& next) {
  CLI::App* command = app.add_subcommand("next", "Print the next fire instants of a cron spec");
  command->add_option("spec", next.spec, "Cron spec, e.g. '0 9 * * mon-fri' or '@every 90s'")->required();
  command->add_flag("--seconds", next.seconds, "Allow a leading seconds field (6 fields)");
  command->add_option("--tz", next.zone, "Zone of the spec unless it has a TZ= prefix")->default_str("UTC");
  command->add_option("--from", next.from, "Start after this RFC 3339 instant (default: now)");
  command->add_option("-n", next.count, "How many instants to print")->default_str("5");
  command->add_option("--dst-gap", next.dst_gap, "Wall times skipped by DST: shift|skip")->default_str("shift");
  command->add_option("--dst-overlap", next.dst_overlap, "Wall times repeated by DST: first|last|both")
      ->default_str("first");
}

/// Flags given on the command line; they win over the config file.
struct Flags {
  std::vector<std::string> jobs;
  std::optional<std::string> crontab_format, replica_id;
  std::optional<std::string> config, zone, coordinator, coordinator_password_file, coordination, claim_ttl, max_clock_skew, claim_prefix, claim_bucket,
      fleet_prefix, fleet_bucket, catch_up, history_age, leader_ttl, leader_key, leader_bucket, on_leadership_loss, metrics, http, api_token_file, log_format, shutdown_grace, kill_grace, store_wait;
  std::optional<std::size_t> max_concurrent, history, keep_succeeded, keep_failed;
  std::optional<std::string> output_dir;
  bool seconds = false;
  bool watch = false;
  bool require_noeviction = false;
  bool catch_up_beyond_claim_ttl = false;
};

/// --config, the jobs files and how they read.
void add_source_flags(CLI::App* command, Flags& flags, bool with_jobs) {
  command->add_option("--config", flags.config, "TOML config file (flags win over it)");
  if (with_jobs) {
    command->add_option("jobs", flags.jobs,
                        "Jobs files and cron.d directories (crontab syntax; /etc/crontab and cron.d files with their "
                        "user column)");
    command->add_option("--crontab-format", flags.crontab_format,
                        "user (spec, command), system (spec, user, command) or auto (default: system for /etc/crontab "
                        "and /etc/cron.d); a file's own '# fleetcron-file: format=' line wins");
  }
  command->add_flag("--seconds", flags.seconds, "Jobs have a leading seconds field (6 fields)");
  command->add_option("--replica-id", flags.replica_id,
                      "This replica's name in the registry, ledger, lease, status and logs (else FLEETCRON_REPLICA_ID; "
                      "default host-pid-random); unique among the live replicas");
  command->add_flag("--watch", flags.watch, "Reload the jobs files and directories when they change (as SIGHUP; ConfigMap updates too)");
  command->add_option("--tz", flags.zone, "Zone of jobs without CRON_TZ (default UTC)");
}

/// The coordinator, its mode, claims and leadership.
void add_coordination_flags(CLI::App* command, Flags& flags) {
  command->add_option("--coordinator", flags.coordinator,
                      "memory (default), redis://…, rediss://… (TLS), redis-sentinel://h1,h2,h3/name, unix:/path, "
                      "nats://…?bucket=…, tls://… or postgres://…");
  command->add_option("--coordinator-password-file", flags.coordinator_password_file,
                      "File holding the coordinator's password (else FLEETCRON_REDIS_PASSWORD, FLEETCRON_NATS_PASSWORD or "
                      "FLEETCRON_POSTGRES_PASSWORD)");
  command->add_option("--coordination", flags.coordination, "claim (default), leader or both");
  command->add_option("--claim-ttl", flags.claim_ttl, "How long a fire claim is kept (default 10m)");
  command->add_flag("--require-noeviction", flags.require_noeviction,
                    "Refuse to run unless the Redis maxmemory-policy is noeviction");
  command->add_option("--max-clock-skew", flags.max_clock_skew,
                      "Claims are refused while the local clock is further than this from the store's (default 5s)");
  command->add_option("--claim-prefix", flags.claim_prefix, "Redis claim key prefix (default cron:claim:)");
  command->add_option("--claim-bucket", flags.claim_bucket, "NATS claims bucket (default FLEETCRON_CLAIMS)");
  command->add_option("--fleet-prefix", flags.fleet_prefix,
                      "Redis prefix of the fleet state (default: the claim prefix with claim: as fleet:)");
  command->add_option("--fleet-bucket", flags.fleet_bucket,
                      "NATS bucket of the fleet state (default: the claims bucket with CLAIMS as STATE)");
  command->add_option("--leader-ttl", flags.leader_ttl, "Leadership lease (Redis and PostgreSQL 30s, NATS 10s by default)");
  command->add_option("--leader-key", flags.leader_key, "Leader key (cron:leader / cron_leader)");
  command->add_option("--leader-bucket", flags.leader_bucket, "NATS leader bucket (default FLEETCRON_LEADER)");
  command->add_option("--on-leadership-loss", flags.on_leadership_loss,
                      "Running jobs when leadership is lost: cancel or finish (default: finish in both, cancel in leader)");
}

/// The fleet state: catch-up and history.
void add_fleet_flags(CLI::App* command, Flags& flags) {
  command->add_option("--catch-up", flags.catch_up,
                      "How far back fires missed while the whole fleet was down are caught up (default 7d; 0: off)");
  command->add_flag("--catch-up-beyond-claim-ttl", flags.catch_up_beyond_claim_ttl,
                    "Catch up past the claim TTL too: only for a fleet without libtnb/cron replicas");
  command->add_option("--history", flags.history, "Ledger records kept per job (default 100; 0: no ledger)")
      ->check(CLI::Range(0, 10'000));
  command->add_option("--history-age", flags.history_age, "Ledger records older than this go (default 30d; at most 400d)");
}

/// The daemon's own: HTTP, logs, graces, concurrency, runs' output.
void add_daemon_flags(CLI::App* command, Flags& flags) {
  command->add_option("--http", flags.http, "Serve the API, the status page, /metrics, /healthz, /readyz on host:port");
  command->add_option("--metrics", flags.metrics, "Alias of --http");
  command->add_option("--api-token-file", flags.api_token_file, "File holding the bearer token the API's writes need");
  command->add_option("--log-format", flags.log_format, "text (default) or json");
  command->add_option("--shutdown-grace", flags.shutdown_grace, "How long SIGTERM lets runs finish (default 30s)");
  command->add_option("--store-wait", flags.store_wait,
                      "run: exit 1 if the store has not answered this long after the start (default 5m; 0: wait for "
                      "ever); a refused password, database or certificate exits 2 at once");
  command->add_option("--kill-grace", flags.kill_grace, "SIGTERM to SIGKILL for timed-out runs (default 5s)");
  command->add_option("--max-concurrent", flags.max_concurrent, "Runs at once at most (default 64)");
  command->add_option("--output-dir", flags.output_dir,
                      "Where this host keeps its runs' output for `fleetcron logs` (default /var/lib/fleetcron/runs "
                      "for root; none: nowhere)");
  command->add_option("--keep-succeeded", flags.keep_succeeded, "Succeeded runs' output kept per job (default 10)")
      ->check(CLI::Range(0, 1000));
  command->add_option("--keep-failed", flags.keep_failed, "Failed runs' output kept per job (default 20)")
      ->check(CLI::Range(0, 1000));
}

void add_settings_flags(CLI::App* command, Flags& flags, bool with_jobs) {
  add_source_flags(command, flags, with_jobs);
  add_coordination_flags(command, flags);
  add_fleet_flags(command, flags);
  add_daemon_flags(command, flags);
}

std::chrono::nanoseconds flag_duration(const std::string& option, const std::string& text) {
  try {
    const auto value = fleetcron::parse_duration(text);
    if (value <= std::chrono::nanoseconds::zero()) throw std::invalid_argument("must be positive");
    return value;
  } catch (const std::exception& e) {
    throw fleetcron::daemon::SettingsError("option " + option + " \"" + text + "\": " + e.what());
  }
}

/// The jobs files and how they read: replica id, format, seconds, zone.
void apply_source_flags(const Flags& flags, Settings& settings) {
  if (!flags.jobs.empty()) settings.jobs_paths = flags.jobs;
  if (const char* from_environment = std::getenv("FLEETCRON_REPLICA_ID"); from_environment != nullptr) {
    settings.replica_id = from_environment;
  }
  if (flags.replica_id) settings.replica_id = *flags.replica_id;
  if (flags.crontab_format) {
    try {
      settings.crontab_format = fleetcron::daemon::crontab_format_from_string(*flags.crontab_format);
    } catch (const std::invalid_argument& e) {
      throw fleetcron::daemon::SettingsError("option --crontab-format " + std::string(e.what()));
    }
  }
  if (flags.seconds) settings.seconds = true;
  if (flags.watch) settings.watch = true;
  if (flags.zone) settings.zone = *flags.zone;
}

/// The coordinator, its mode, claims and leadership.
void apply_coordination_flags(const Flags& flags, Settings& settings) {
  if (flags.coordinator) settings.coordinator = *flags.coordinator;
  if (flags.coordinator_password_file) settings.coordinator_password_file = *flags.coordinator_password_file;
  if (flags.coordination) {
    const auto mode = fleetcron::daemon::coordination_mode_from_string(*flags.coordination);
    if (!mode) throw fleetcron::daemon::SettingsError("option --coordination \"" + *flags.coordination + "\": expected claim, leader or both");
    settings.coordination = *mode;
  }
  if (flags.claim_ttl) settings.claim_ttl = flag_duration("--claim-ttl", *flags.claim_ttl);
  if (flags.require_noeviction) settings.require_noeviction = true;
  if (flags.max_clock_skew) settings.max_clock_skew = flag_duration("--max-clock-skew", *flags.max_clock_skew);
  if (flags.claim_prefix) settings.claim_prefix = *flags.claim_prefix;
  if (flags.claim_bucket) settings.claim_bucket = *flags.claim_bucket;
  if (flags.fleet_prefix) settings.fleet_prefix = *flags.fleet_prefix;
  if (flags.fleet_bucket) settings.fleet_bucket = *flags.fleet_bucket;
  if (flags.leader_ttl) settings.leader_ttl = flag_duration("--leader-ttl", *flags.leader_ttl);
  if (flags.leader_key) settings.leader_key = *flags.leader_key;
  if (flags.leader_bucket) settings.leader_bucket = *flags.leader_bucket;
  if (flags.on_leadership_loss) {
    const auto policy = fleetcron::daemon::leadership_loss_from_string(*flags.on_leadership_loss);
    if (!policy) {
      throw fleetcron::daemon::SettingsError("option --on-leadership-loss \"" + *flags.on_leadership_loss +
                                             "\": expected cancel or finish");
    }
    settings.on_leadership_loss = *policy;
  }
}

/// The fleet state: catch-up and history.
void apply_fleet_flags(const Flags& flags, Settings& settings) {
  if (flags.catch_up) {
    try {
      settings.catch_up = fleetcron::daemon::parse_catch_up(*flags.catch_up);
    } catch (const std::invalid_argument& e) {
      throw fleetcron::daemon::SettingsError("option --catch-up \"" + *flags.catch_up + "\": " + e.what());
    }
  }
  if (flags.catch_up_beyond_claim_ttl) settings.catch_up_beyond_claim_ttl = true;
  if (flags.history) settings.history = *flags.history;
  if (flags.history_age) {
    try {
      settings.history_age = fleetcron::daemon::parse_history_age(*flags.history_age);
    } catch (const std::invalid_argument& e) {
      throw fleetcron::daemon::SettingsError("option --history-age \"" + *flags.history_age + "\": " + e.what());
    }
  }
}

/// The daemon's own: HTTP, logs, graces, concurrency, runs' output.
void apply_daemon_flags(const Flags& flags, Settings& settings) {
  if (flags.metrics) settings.http = *flags.metrics;
  if (flags.http) settings.http = *flags.http;
  if (flags.metrics || flags.http) (void)fleetcron::daemon::parse_listen_address(settings.http, flags.http ? "--http" : "--metrics");
  if (flags.api_token_file) settings.api_token_file = *flags.api_token_file;
  if (flags.log_format) {
    if (*flags.log_format != "text" && *flags.log_format != "json") {
      throw fleetcron::daemon::SettingsError("option --log-format \"" + *flags.log_format + "\": expected text or json");
    }
    settings.log_format = *flags.log_format == "json" ? fleetcron::daemon::LogFormat::json : fleetcron::daemon::LogFormat::text;
  }
  if (flags.shutdown_grace) settings.shutdown_grace = flag_duration("--shutdown-grace", *flags.shutdown_grace);
  if (flags.store_wait) {
    settings.store_wait = fleetcron::daemon::is_zero_duration(*flags.store_wait)
                              ? std::chrono::nanoseconds::zero()
                              : flag_duration("--store-wait", *flags.store_wait);
  }
  if (flags.kill_grace) settings.kill_grace = flag_duration("--kill-grace", *flags.kill_grace);
  if (flags.max_concurrent) {
    if (*flags.max_concurrent < 1 || *flags.max_concurrent > 4096) {
      throw fleetcron::daemon::SettingsError("option --max-concurrent: expected 1..4096");
    }
    settings.max_concurrent = *flags.max_concurrent;
  }
  if (flags.output_dir) {
    settings.output_dir = fleetcron::daemon::output_dir_from(*flags.output_dir);
    if (!settings.output_dir.empty() && settings.output_dir.front() != '/') {
      throw fleetcron::daemon::SettingsError("option --output-dir \"" + *flags.output_dir + "\": an absolute path, or none");
    }
  }
  if (flags.keep_succeeded) settings.keep_succeeded = *flags.keep_succeeded;
  if (flags.keep_failed) settings.keep_failed = *flags.keep_failed;
}

Settings build_settings(const Flags& flags) {
  Settings settings;
  settings.output_dir = fleetcron::daemon::default_output_dir();  // the config and the flags may say otherwise
  if (flags.config) fleetcron::daemon::apply_config_file(*flags.config, settings);
  apply_source_flags(flags, settings);
  apply_coordination_flags(flags, settings);
  apply_fleet_flags(flags, settings);
  apply_daemon_flags(flags, settings);
  fleetcron::daemon::resolve_coordinator_password(settings);
  return settings;
}

/// A daemon started with stdin, stdout or stderr closed would hand those
/// numbers to its own pipes and sockets, where a job's redirections land.
void open_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) == -1 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) std::abort();
  }
}

int run_daemon(const Flags& flags) {
  open_standard_descriptors();
  // Before any thread exists: the signals the daemon waits for are blocked
  // everywhere (every thread inherits the mask); runs get a clean mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Settings settings;
  try {
    settings = build_settings(flags);
    fleetcron::daemon::validate(settings);
  } catch (const std::exception& e) {
    std::cerr << "fleetcron run: " << e.what() << '\n';
    return exit_usage;
  }
  fleetcron::daemon::LogSink log(settings.log_format, std::cerr);
  std::optional<fleetcron::daemon::Daemon> daemon;
  try {
    daemon.emplace(settings, log);
  } catch (const std::exception& e) {
    std::cerr << "fleetcron run: " << e.what() << '\n';
    return exit_usage;
  }
  // Whatever goes wrong from here on is logged and ends the process with
  // exit code 1 (the destructor still stops the runs), never std::terminate.
  try {
    return daemon->run();
  } catch (const std::exception& e) {
    log.write("error", "fatal", e.what());
  } catch (...) {
    log.write("error", "fatal", "non-standard exception");
  }
  return exit_failure;
}

/// `fleetcron --version`: the version, then each backend compiled in with
/// the libraries under it.
std::string version_text() {
  return fmt::format("fleetcron {}\nbackends:\n  memory (one process)\n  {}\n  {}\n  {}", FLEETCRON_VERSION_STRING,
                     fleetcron::redis::build_info(), fleetcron::nats::build_info(), fleetcron::postgres::build_info());
}

}  // namespace

namespace {

/// pause, resume, trigger: one job's fleet-wide controls.
struct ControlCommand {
  fleetcron::daemon::ControlAction action;
  const char* name;
  const char* description;
  Flags flags;
  std::string job;
  bool json = false;
  CLI::App* command = nullptr;
  std::string request_id;
  bool force = false;
};

/// Every subcommand's flags and arguments, where CLI11 writes them (it
/// keeps their addresses: this does not move once defined).
struct CommandLine {
  fleetcron::daemon::NextCommandOptions next;
  Flags run_flags, validate_flags, status_flags, history_flags, logs_flags, migrate_flags, init_flags;
  int validate_count = 3;
  bool status_json = false;
  std::string history_job;
  std::size_t history_count = 20;
  bool history_json = false;
  std::string logs_job, logs_fire;
  bool logs_list = false;
  std::array<ControlCommand, 3> controls{{
      {fleetcron::daemon::ControlAction::pause, "pause", "Pause a job for the whole fleet, until resumed", {}, {}, false, nullptr, {}},
      {fleetcron::daemon::ControlAction::resume, "resume", "Resume a job paused for the whole fleet", {}, {}, false, nullptr, {}},
      {fleetcron::daemon::ControlAction::trigger, "trigger", "Have one replica of the fleet run a job once, now", {}, {}, false, nullptr, {}},
  }};
};

/// run, validate, status, history and logs.
void define_reading_commands(CLI::App& app, CommandLine& line) {
  CLI::App* run = app.add_subcommand("run", "Run the jobs of a jobs file (crontab syntax), coordinated with other replicas");
  add_settings_flags(run, line.run_flags, true);
  CLI::App* validate = app.add_subcommand("validate", "Check a jobs file; print each job's key and next fires");
  add_settings_flags(validate, line.validate_flags, true);
  validate->add_option("-n", line.validate_count, "Fires to print per job")->default_str("3")->check(CLI::Range(0, 1000));
  CLI::App* status = app.add_subcommand(
      "status", "Show the leader, the replicas and each job's next fire, last run and controls; runs nothing");
  add_settings_flags(status, line.status_flags, false);
  status->add_flag("--json", line.status_json, "One JSON document (schema: docs/daemon.md)");
  CLI::App* history = app.add_subcommand(
      "history", "Show a job's (or every job's) newest runs, skips and misses from the fleet's ledger");
  add_settings_flags(history, line.history_flags, false);
  history->add_option("job", line.history_job, "The job's key (default: every job the fleet runs)");
  history->add_option("-n", line.history_count, "Records to print")->default_str("20")->check(CLI::Range(1, 10'000));
  history->add_flag("--json", line.history_json, "One JSON document (schema: docs/daemon.md)");
  CLI::App* logs = app.add_subcommand("logs", "Print the output of a job's past run, as this host keeps it");
  add_settings_flags(logs, line.logs_flags, false);
  logs->add_option("job", line.logs_job, "The job's key")->required();
  logs->add_option("fire", line.logs_fire, "The run: its fire key or instant (default: the newest run kept)");
  logs->add_flag("--list", line.logs_list, "List the job's runs kept on this host, newest first");
}

/// migrate, init, and the controls.
void define_store_commands(CLI::App& app, CommandLine& line) {
  CLI::App* migrate = app.add_subcommand(
      "migrate", "PostgreSQL: create the tables fleetcron and libtnb/cron use (idempotent; prints what it did)");
  add_settings_flags(migrate, line.migrate_flags, false);
  CLI::App* init = app.add_subcommand(
      "init", "Declare a new Redis or NATS store before the fleet's first start, so that its first fires are not "
              "refused as after a reset (PostgreSQL: migrate)");
  add_settings_flags(init, line.init_flags, false);
  for (auto& control : line.controls) {
    control.command = app.add_subcommand(control.name, control.description);
    add_settings_flags(control.command, control.flags, false);
    control.command->add_option("job", control.job, "The job's key")->required();
    control.command->add_flag("--json", control.json, "One JSON document (schema: docs/daemon.md)");
    control.command->add_flag("--force", control.force,
                              "Act on a job the fleet's catalogue does not list (one no replica has announced yet)");
    if (control.action == fleetcron::daemon::ControlAction::trigger) {
      control.command->add_option("--request-id", control.request_id,
                                  "This request's id: sent again with it (a retry), it triggers nothing new");
    }
  }
}

/// The parsed subcommand's work, from its settings (next and run have
/// their own paths).
int dispatch(CLI::App& app, CommandLine& line) {
  ControlCommand* control = nullptr;
  for (auto& candidate : line.controls) {
    if (candidate.command->parsed()) control = &candidate;
  }
  Flags& flags = control != nullptr                 ? control->flags
                 : app.got_subcommand("validate") ? line.validate_flags
                 : app.got_subcommand("history")  ? line.history_flags
                 : app.got_subcommand("logs")     ? line.logs_flags
                 : app.got_subcommand("migrate")  ? line.migrate_flags
                 : app.got_subcommand("init")     ? line.init_flags
                                                  : line.status_flags;
  Settings settings;
  try {
    settings = build_settings(flags);
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return exit_usage;
  }
  if (app.got_subcommand("validate")) {
    if (settings.jobs_paths.empty()) {
      std::cerr << "fleetcron validate: no jobs file\n";
      return exit_usage;
    }
    return fleetcron::daemon::run_validate_command(settings, line.validate_count, std::cout, std::cerr);
  }
  if (control != nullptr) {
    return fleetcron::daemon::run_control_command(settings, control->action, control->job, control->json, std::cout,
                                                  std::cerr, control->request_id, control->force);
  }
  if (app.got_subcommand("history")) {
    return fleetcron::daemon::run_history_command(settings, line.history_job, line.history_count, line.history_json,
                                                  std::cout, std::cerr);
  }
  if (app.got_subcommand("logs")) {
    return fleetcron::daemon::run_logs_command(settings, line.logs_job, line.logs_fire, line.logs_list, std::cout,
                                               std::cerr);
  }
  if (app.got_subcommand("migrate")) return fleetcron::daemon::run_migrate_command(settings, std::cout, std::cerr);
  if (app.got_subcommand("init")) return fleetcron::daemon::run_init_command(settings, std::cout, std::cerr);
  return fleetcron::daemon::run_status_command(settings, line.status_json, std::cout, std::cerr);
}

}  // namespace

int run_main(int argc, char** argv) {
  CLI::App app{"fleetcron: cron for a fleet; every fire runs once"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  CommandLine line;
  add_next_command(app, line.next);
  define_reading_commands(app, line);
  define_store_commands(app, line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_usage;
  }
  if (app.got_subcommand("next")) return fleetcron::daemon::run_next_command(line.next, std::cout, std::cerr);
  if (app.got_subcommand("run")) return run_daemon(line.run_flags);
  return dispatch(app, line);
}

// Whether a sanitizer checks the process at its exit (LeakSanitizer).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FLEETCRON_CHECKED_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FLEETCRON_CHECKED_EXIT 1
#endif
#endif

int main(int argc, char** argv) {
  const int code = run_main(argc, argv);
#ifdef FLEETCRON_CHECKED_EXIT
  return code;
#else
  // Every thread is joined and every file closed by now. The exit handlers
  // left are the libraries' own, and one crashes: after nats.c used TLS
  // (a failed handshake at least), OpenSSL's cleanup at exit segfaults in
  // about one exit in two (exit 139 instead of 2, and systemd restarts a
  // daemon it should have left stopped). Nothing is left for them to do.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}
