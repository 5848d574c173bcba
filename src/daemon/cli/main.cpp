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

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "daemon/config/setting_table.h"
#include "daemon/run/daemon.h"
#include "daemon/cli/next_command.h"
#include "fleetcron/duration.h"
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
using Flags = fleetcron::daemon::CommandLineSettings;

/// --help's text of a setting: its help, values and default.
std::string flag_help(const fleetcron::daemon::SettingSpec& spec) {
  std::string help(spec.help);
  const bool has_range = !spec.range.empty() && !spec.value_name.empty();
  const bool has_default = !spec.default_text.empty() && spec.default_text != "false";
  if (has_range && has_default) return fmt::format("{} (values: {}; default {})", help, spec.range, spec.default_text);
  if (has_range) return fmt::format("{} (values: {})", help, spec.range);
  if (has_default) return fmt::format("{} (default {})", help, spec.default_text);
  return help;
}

/// --config, and a flag for every setting that has one (setting_table()).
void add_settings_flags(CLI::App* command, Flags& flags, bool with_jobs) {
  command->add_option("--config", flags.config, "TOML config file (flags win over it)");
  const auto specs = fleetcron::daemon::setting_table();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    if (spec.flag.empty() || (spec.jobs_commands_only && !with_jobs)) continue;
    if (spec.flag == "jobs") {
      if (with_jobs) command->add_option("jobs", flags.jobs, flag_help(spec));
      continue;
    }
    CLI::Option* option = spec.value_name.empty()
                              ? command->add_flag(std::string(spec.flag), flags.given[i].on, flag_help(spec))
                              : command->add_option(std::string(spec.flag), flags.given[i].text, flag_help(spec))
                                    ->type_name(std::string(spec.value_name));
    option->group(std::string(spec.group));
  }
}

using fleetcron::daemon::build_settings;

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
  std::string text = fmt::format("fleetcron {}\nbackends:", FLEETCRON_VERSION_STRING);
  for (const fleetcron::daemon::Backend* backend : fleetcron::daemon::backends()) text += "\n  " + backend->build_info();
  return text;
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
  fleetcron::daemon::StatusQuery status;
  std::string history_job;
  std::size_t history_count = 20;
  bool history_json = false;
  std::string logs_job, logs_fire;
  bool logs_list = false;
  std::string settings_format = "markdown";
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
  status->add_flag("--json", line.status.json, "One JSON document (schema: docs/daemon.md)");
  status->add_flag("--all", line.status.all, "List every job, however many (beyond 50 status summarises them)");
  status->add_flag("--failing", line.status.failing,
                   "Only the jobs whose newest run failed, timed out or was lost, or with lost runs (reads every job's ledger)");
  status->add_option("--prefix", line.status.prefix, "Only the jobs whose key starts with PREFIX")->type_name("PREFIX");
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

/// settings: every setting, as docs/daemon.md and fleetcron(1) show them.
void define_settings_command(CLI::App& app, CommandLine& line) {
  CLI::App* settings = app.add_subcommand(
      "settings", "Print every setting: flag, TOML key, environment variable, default, values and what it does");
  settings->add_option("--format", line.settings_format, "markdown (docs/daemon.md) or man (fleetcron(1))")
      ->default_str("markdown")
      ->check(CLI::IsMember({"markdown", "man"}));
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
  return fleetcron::daemon::run_status_command(settings, line.status, std::cout, std::cerr);
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
  define_settings_command(app, line);
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
  if (app.got_subcommand("settings")) {
    std::cout << (line.settings_format == "man" ? fleetcron::daemon::settings_man()
                                                : fleetcron::daemon::settings_markdown());
    return 0;
  }
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
