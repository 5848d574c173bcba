// The daemon's settings: defaults, then the TOML config file, then flags.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config/crontab_format.h"
#include "daemon/observe/job_metrics_scope.h"
#include "fleetcron/error.h"
#include "fleetcron/redis/claimer.h"

namespace fleetcron::daemon {

enum class CoordinationMode { claim, leader, both };
[[nodiscard]] std::string_view to_string(CoordinationMode mode) noexcept;
[[nodiscard]] std::optional<CoordinationMode> coordination_mode_from_string(std::string_view text) noexcept;

enum class LogFormat { text, json };

/// What running jobs do when this replica loses leadership.
enum class LeadershipLoss {
  cancel,  ///< SIGTERM them (then SIGKILL after kill_grace)
  finish,  ///< let them run to their end
};
[[nodiscard]] std::string_view to_string(LeadershipLoss policy) noexcept;
[[nodiscard]] std::optional<LeadershipLoss> leadership_loss_from_string(std::string_view text) noexcept;

/// The options of every job whose directive leaves them unset (TOML
/// [defaults]; the directives of the same names, docs/daemon.md).
struct JobDefaults {
  std::string dir;       // dir=
  std::string env_file;  // env-file=
  std::string user;      // user=
  std::string on_failure, on_lost, on_missed;  // on-failure=, on-lost=, on-missed= (commands)
  std::string notify, ping;                    // notify=, ping= (URLs)
};

struct Settings {
  /// Jobs files and cron.d-style directories (daemon/config/jobs_sources.h).
  std::vector<std::string> jobs_paths;
  /// Whether their lines have a user column; nullopt: by path (auto).
  std::optional<CrontabFormat> crontab_format;
  /// This replica's name in the registry, the ledger, the lease, status,
  /// logs and metrics (--replica-id, FLEETCRON_REPLICA_ID); empty: host,
  /// pid and a random suffix, new at each start.
  std::string replica_id;
  bool seconds = false;
  std::string zone = "UTC";
  /// "memory", "redis://…" or "nats://…".
  std::string coordinator = "memory";
  /// A file whose content (one trailing newline dropped) is the
  /// coordinator's password, kept out of argv and of the jobs' environment.
  std::string coordinator_password_file;
  /// The password resolved from that file or from FLEETCRON_REDIS_PASSWORD
  /// / FLEETCRON_NATS_PASSWORD (resolve_coordinator_password); never printed.
  std::string coordinator_password;
  CoordinationMode coordination = CoordinationMode::claim;
  /// Claims: TTL, Redis key prefix, NATS bucket.
  std::chrono::nanoseconds claim_ttl = redis::default_claim_ttl;  // libtnb/cron's, for every backend
  std::string claim_prefix{redis::default_claim_prefix};
  std::string claim_bucket = "FLEETCRON_CLAIMS";
  int nats_replicas = 1;  // NATS: the JetStream replicas of the buckets created (URI ?replicas=)
  /// The fleet state (docs/fleet-state.md): Redis key prefix (empty:
  /// derived from claim_prefix, see effective_fleet_prefix()), how far back
  /// catch-up reaches (0: no cursors, no catch-up), and whether it reaches
  /// past the claim TTL (only for a fleet without libtnb/cron replicas).
  std::string fleet_prefix;
  std::string fleet_bucket;  // NATS; empty: see effective_fleet_bucket()
  std::chrono::nanoseconds catch_up = std::chrono::hours{24 * 7};
  bool catch_up_beyond_claim_ttl = false;
  /// The run ledger (docs/fleet-state.md): each job keeps its newest
  /// `history` records (0: no ledger; at most 10,000), none older than
  /// `history_age` (at most 400 days).
  std::size_t history = 100;
  std::chrono::nanoseconds history_age = std::chrono::hours{24 * 30};
  /// The claimers' clock-skew guard (Redis and NATS); nullopt:
  /// default_max_clock_skew(claim_ttl). See max_clock_skew().
  std::optional<std::chrono::nanoseconds> max_clock_skew;
  /// Redis: refuse to run unless maxmemory-policy is noeviction (read at
  /// start and on every reconnect). Otherwise a bad policy is a warning.
  bool require_noeviction = false;
  /// Leadership: TTL (Redis lease; NATS leader bucket TTL); nullopt: the
  /// backend's default (Redis 30 s, NATS 10 s, memory 30 s).
  std::optional<std::chrono::nanoseconds> leader_ttl;
  std::string leader_key;  // empty: redis::default_leader_key, nats::default_leader_key
  std::string leader_bucket = "FLEETCRON_LEADER";
  /// nullopt: finish in both mode (each run holds its claim, which a lease
  /// hiccup does not take away), cancel in leader mode (the term is the
  /// run's only fence).
  std::optional<LeadershipLoss> on_leadership_loss;
  /// The HTTP listener (--http, alias --metrics; TOML http or metrics):
  /// "host:port" or empty for none.
  std::string http;
  /// A file whose content (one trailing newline dropped) is the bearer
  /// token the API's writes need; empty: the API is read-only.
  std::string api_token_file;
  LogFormat log_format = LogFormat::text;
  /// Which jobs have fleetcron_job_* series on /metrics (--job-metrics).
  JobMetricsScope job_metrics = JobMetricsScope::all;
  std::chrono::nanoseconds shutdown_grace = std::chrono::seconds{30};
  /// How long `run` waits for a store that has not answered since the
  /// start before it exits 1 (0: for ever); an outage after the first
  /// answer never stops the daemon.
  std::chrono::nanoseconds store_wait = std::chrono::minutes{5};
  std::chrono::nanoseconds kill_grace = std::chrono::seconds{5};
  std::size_t max_concurrent = 64;
  std::size_t max_output_bytes = 1 << 20;
  /// Where this host keeps its runs' output (docs/daemon.md#output-of-past-runs);
  /// empty: nowhere. The program's default is default_output_dir().
  std::string output_dir;
  /// Runs' output kept per job, unless its keep-succeeded=/keep-failed= say
  /// otherwise (0..max_kept_runs); none older than history_age.
  std::size_t keep_succeeded = 10;
  std::size_t keep_failed = 20;
  JobDefaults job_defaults;
  /// Reload when the jobs file changes (inotify; ConfigMap swaps too), as SIGHUP does.
  bool watch = false;
};

/// The Redis prefix of the fleet state: fleet_prefix if set; else
/// claim_prefix with a trailing "claim:" replaced by "fleet:" (the
/// default cron:claim: gives cron:fleet:), or with "fleet:" appended. So
/// two fleets kept apart by their claim prefixes keep their cursors apart.
[[nodiscard]] std::string effective_fleet_prefix(const Settings& settings);
/// The NATS bucket of the fleet state: fleet_bucket if set; else
/// claim_bucket with a trailing "CLAIMS" replaced by "STATE" (the default
/// FLEETCRON_CLAIMS gives FLEETCRON_STATE), or with "_STATE" appended.
[[nodiscard]] std::string effective_fleet_bucket(const Settings& settings);

/// $STATE_DIRECTORY/runs (systemd's StateDirectory=), else
/// /var/lib/fleetcron/runs for root, else $XDG_STATE_HOME/fleetcron/runs
/// (~/.local/state/fleetcron/runs).
[[nodiscard]] std::string default_output_dir();
/// An output_dir as written in a flag or TOML: "none" is "" (off).
[[nodiscard]] std::string output_dir_from(std::string_view text);

/// A catch-up reach as written in flags, TOML and the catch-up= directive:
/// a duration from 0 (off) to 366 days. Throws std::invalid_argument.
[[nodiscard]] std::chrono::nanoseconds parse_catch_up(std::string_view text);
/// A ledger age: a duration from 1 ms to 400 days; std::invalid_argument
/// saying what is wrong otherwise.
[[nodiscard]] std::chrono::nanoseconds parse_history_age(std::string_view text);

/// on_leadership_loss with its default for the coordination mode.
[[nodiscard]] LeadershipLoss effective_leadership_loss(const Settings& settings) noexcept;

/// The URI with anything before its last '@' after the scheme shown as ***:
/// an unknown scheme must not print the password it carries.
[[nodiscard]] std::string without_userinfo(const std::string& uri);

/// A bad config file value: file:line: what is wrong.
class SettingsError : public std::runtime_error, public Error {
 public:
  using std::runtime_error::runtime_error;
  [[nodiscard]] const char* what() const noexcept override { return std::runtime_error::what(); }
};

/// Applies the TOML file at `path` onto `settings`; unknown keys and bad
/// values are SettingsErrors naming the file and line.
void apply_config_file(const std::string& path, Settings& settings);
/// The same for TOML text; `path` names it in errors.
void apply_config_text(std::string_view text, const std::string& path, Settings& settings);

/// Where the HTTP listener binds: "host:port", "[v6]:port", ":port" or a
/// bare "port" (both loopback, 127.0.0.1; "0.0.0.0:port" for every
/// interface); port 0 picks a free one.
struct ListenAddress {
  std::string host;
  int port = 0;
};
/// Throws SettingsError naming the option and the value.
[[nodiscard]] ListenAddress parse_listen_address(const std::string& text, std::string_view option = "--http");

/// Environment variables that carry the coordinator's password; removed
/// from the environment the jobs and notification commands get.
inline constexpr const char* password_variables[] = {"FLEETCRON_REDIS_PASSWORD", "FLEETCRON_NATS_PASSWORD",
                                                     "FLEETCRON_POSTGRES_PASSWORD"};

/// Fills coordinator_password from coordinator_password_file, else from
/// the backend's variable (Backend::password_variable():
/// FLEETCRON_REDIS_PASSWORD, FLEETCRON_NATS_PASSWORD or
/// FLEETCRON_POSTGRES_PASSWORD). Throws SettingsError for a coordinator
/// that names no backend (every form listed), an unreadable file or a URI
/// that carries a password as well.
void resolve_coordinator_password(Settings& settings);

/// A secret kept in a file (a password, the API token): its content with
/// one trailing newline dropped. Throws SettingsError naming `what` and the
/// path for an unreadable, empty or over-long (4 KiB) file.
[[nodiscard]] std::string read_secret_file(const std::string& path, std::string_view what);

/// The shortest leadership lease the daemon accepts.
inline constexpr std::chrono::nanoseconds min_leader_ttl = std::chrono::seconds{1};

/// Checks the combination (e.g. leader TTL range); throws SettingsError.
void validate(const Settings& settings);

/// The daemon's default skew guard: 5 s, or claim_ttl / 4 if that is less.
/// Tighter than the library's claim_ttl / 4 because it also bounds what a
/// store reset loses (fires before the reset's epoch + the guard).
[[nodiscard]] std::chrono::nanoseconds default_max_clock_skew(std::chrono::nanoseconds claim_ttl);
/// Whether `text` is a duration of zero ("0", "0s", "0m"): a setting's
/// "off" where other durations must be positive. False for bad text, which
/// the caller's positive-duration parsing then reports.
[[nodiscard]] bool is_zero_duration(std::string_view text) noexcept;
/// settings.max_clock_skew, or the default for its claim TTL.
[[nodiscard]] std::chrono::nanoseconds max_clock_skew(const Settings& settings);

}  // namespace fleetcron::daemon
