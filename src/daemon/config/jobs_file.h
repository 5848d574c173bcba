// The jobs file: Vixie crontab syntax plus per-job directive comments.
//
//   # comment
//   NAME=value                 environment for the jobs below (quotes optional)
//   CRON_TZ=Europe/Berlin      zone of the jobs below (TZ= too; both exported)
//   # fleetcron: key=nightly timeout=30m jitter=10s retries=3 overlap=skip missed=run-once dst-gap=skip
//   0 3 * * *  /usr/local/bin/backup --full
//
// A job line is a spec (5 fields, 6 with seconds first when enabled, a
// descriptor such as @daily or @every 90s, or @reboot) then the command,
// run with SHELL -c (/bin/sh unless a SHELL= line says otherwise). As in
// Vixie cron an unescaped '%' ends the command, the text after it is the
// job's standard input (each further '%' a newline) and "\%" is a '%',
// unless a "# fleetcron-file: percent=literal" line keeps '%' literal.
// MAILTO= lines are accepted and reported as not supported (notices).
//
// A system crontab (/etc/crontab, /etc/cron.d/*) has a user column between
// the spec and the command: `17 * * * * root cd / && run-parts …`. A file
// is read in that format when it says so (`# fleetcron-file: format=system`),
// else when the caller says so (run/validate --crontab-format, or its path:
// jobs_sources.h); the column becomes the job's user=.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/config/crontab_format.h"
#include "daemon/config/job_directives.h"
#include "daemon/observe/job_notifications.h"
#include "daemon/run/run_as.h"
#include "daemon/config/settings.h"
#include "fleetcron/cron.h"
#include "fleetcron/error.h"
#include "fleetcron/events.h"
#include "fleetcron/schedule.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::daemon {

/// How the jobs file reads '%' in a command (`# fleetcron-file: percent=`).
enum class PercentMode {
  input,    ///< Vixie cron: '%' starts the standard input, "\%" is a '%' (default)
  literal,  ///< '%' and '\' reach the shell as written
};

/// Where an option of a job was written: line and column (1-based) of its
/// directive, or line 0 for the config file's [defaults].
struct OptionOrigin {
  int line = 0;
  int column = 0;
};

/// One job of the jobs file: its schedule, command and options (not to be
/// confused with fleetcron::Job, the callable a scheduler entry runs).
struct JobDefinition {
  std::string key;
  bool derived_key = false;  // no key=: a hash of the effective spec and the command
  std::string spec;          // as written, with "TZ=zone " added when a CRON_TZ/TZ line applies
  std::string command;
  std::string file;          // the jobs file it was read from
  int line = 0;              // 1-based line of the job in its file
  int command_column = 0;    // 1-based column of its command
  /// `timeout=`: bounds each attempt (EntryOptions::attempt_timeout); 0: none.
  std::chrono::nanoseconds attempt_timeout{0};
  std::optional<std::chrono::nanoseconds> jitter;
  int retries = 0;
  /// history=, keep-succeeded=, keep-failed=: the daemon's settings unless set.
  std::optional<std::size_t> history, keep_succeeded, keep_failed;
  Overlap overlap = Overlap::skip;
  std::optional<MissedFirePolicy> missed;
  /// `catch-up=`: how far back its catch-up reaches (nullopt: --catch-up).
  std::optional<std::chrono::nanoseconds> catch_up;
  /// `recover=`: whether a replica that finds a run of it lost runs it again.
  RecoverPolicy recover = RecoverPolicy::report;
  /// `pause-on-failure=yes`: a run that fails after its last retry pauses
  /// the job fleet-wide (EntryOptions::pause_on_failure).
  bool pause_on_failure = false;
  std::optional<DstPolicy> dst;
  /// `@reboot`: runs once when the daemon starts, on that replica, not
  /// claimed (Vixie cron's meaning); `schedule` never fires.
  bool at_start = false;
  /// `scope=replica`: every replica runs it; never claimed or leader-gated.
  JobScope scope = JobScope::fleet;
  /// The text after the command's first unescaped '%' (percent=input).
  std::optional<std::string> input;
  /// `dir=`: where it runs (absolute; a relative one is resolved against
  /// the jobs file's directory); empty: the daemon's working directory.
  std::string working_directory;
  /// `env-file=`: a dotenv file (resolved like dir=), read at load and
  /// reload: its variables follow the file's in `environment`.
  std::string env_file;
  /// `user=`: the account it runs as; `run_as` is set at load when the
  /// run must switch to it (the daemon is root and it is another user).
  std::string user;
  std::optional<RunAs> run_as;
  OptionOrigin dir_origin, env_file_origin, user_origin, jitter_origin;
  /// `user` came from a system crontab's user column (at user_origin).
  bool user_from_column = false;
  /// on-failure=, on-lost=, on-missed= (commands), notify= and ping= (URLs):
  /// docs/daemon.md#notifications.
  JobNotifications notifications;
  /// The file's NAME=value lines above this job, in order, then its env file's.
  std::vector<std::pair<std::string, std::string>> environment;
  SchedulePtr schedule;

  /// Same job for a reload: key, spec, command, options and environment.
  [[nodiscard]] bool same_definition(const JobDefinition& other) const;
};

/// A line accepted but not acted on (MAILTO=): `validate` and the start
/// log report it.
struct JobsFileNotice {
  int line = 0;
  std::string message;
};

struct JobsFile {
  std::string path;
  std::vector<JobDefinition> jobs;
  std::vector<JobsFileNotice> notices;
  PercentMode percent = PercentMode::input;
  CrontabFormat format = CrontabFormat::user;
  int format_line = 0;  // the fleetcron-file line that chose the format; 0: the caller did
};

/// file:line:column: what is wrong.
class JobsFileError : public std::runtime_error, public Error {
 public:
  JobsFileError(const std::string& file, int line, int column, const std::string& reason);
  [[nodiscard]] const char* what() const noexcept override { return std::runtime_error::what(); }
  [[nodiscard]] int line() const noexcept { return line_; }
  [[nodiscard]] int column() const noexcept { return column_; }

 private:
  int line_, column_;
};

/// Limits: a file of at most 16 MiB, 100,000 jobs (in all the files of a
/// daemon: the catalogue's bound), lines of at most 16 KiB.
inline constexpr std::size_t max_jobs_file_bytes = std::size_t{16} << 20;
inline constexpr std::size_t max_jobs = 100'000;
inline constexpr std::size_t max_line_bytes = 16 * 1024;

/// Parses `text`; `path` names it in errors. `options` gives the seconds
/// field and the default zone; `defaults` the options of the jobs whose
/// directives leave them unset; `format` whether its lines have a user
/// column (a format= file setting overrides it). Throws JobsFileError. It
/// reads nothing else: load_jobs_file() resolves directories, env files
/// and users.
[[nodiscard]] JobsFile parse_jobs_file(std::string_view text, const std::string& path, const ParseOptions& options,
                                       const JobDefaults& defaults = {}, CrontabFormat format = CrontabFormat::user);
/// Reads and parses a file, then checks each job's directory, reads its env
/// file and looks up its user (resolve_job_resources); a missing or
/// unreadable file is a JobsFileError at line 0.
[[nodiscard]] JobsFile load_jobs_file(const std::string& path, const ParseOptions& options,
                                      const JobDefaults& defaults = {}, CrontabFormat format = CrontabFormat::user);
/// What load_jobs_file() does after parsing; throws JobsFileError at the
/// option's position (or the job's line, for [defaults]). In a file
/// without a user column, a command whose first word is an account name
/// and no program on the job's PATH (`root cd / && …`) is refused: the
/// line was written for a system crontab.
void resolve_job_resources(JobsFile& file);

/// How the daemon reads jobs: seconds field required or none, the zone,
/// and `@every` counted from the epoch (the same instants on every replica).
/// Throws std::runtime_error for an unknown zone.
[[nodiscard]] ParseOptions jobs_parse_options(bool seconds, const std::string& zone);

/// The scheduler entry options of a job (key, jitter, missed policy,
/// retries); the daemon adds it with them, `validate` and reload check it.
[[nodiscard]] EntryOptions entry_options(const JobDefinition& job);

/// A refusal of the scheduler's rules (Scheduler::check()) as a jobs-file
/// error: at the option it is about when known (`jitter=`), else at the
/// job's line; the library's "add: " prefix dropped.
[[nodiscard]] std::string rule_error(const JobDefinition& job, std::string_view what);

/// "job-" + 16 hex digits of a 64-bit FNV-1a hash of spec '\n' command:
/// the same on every replica for the same line.
[[nodiscard]] std::string derive_key(std::string_view spec, std::string_view command);

}  // namespace fleetcron::daemon
