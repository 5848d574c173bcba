#include "daemon/config/setting_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include "daemon/run/run_output.h"
#include "fleetcron/duration.h"

namespace fleetcron::daemon {

namespace {

using std::chrono::nanoseconds;

// ---- what each kind of value accepts; each throws std::invalid_argument with the reason

const std::string& text(const SettingInput& input) {
  if (const std::string* value = shown_text(input)) return *value;
  throw std::invalid_argument("must be a string");
}

std::vector<std::string> paths(const SettingInput& input) {
  if (const std::string* value = shown_text(input)) return {*value};
  const auto* list = std::get_if<std::vector<std::string>>(&input);
  if (list == nullptr || list->empty()) throw std::invalid_argument("must be a path or a non-empty list of paths");
  return *list;
}

bool boolean(const SettingInput& input) {
  if (const auto* value = std::get_if<bool>(&input)) return *value;
  throw std::invalid_argument("must be true or false");
}

nanoseconds positive_duration(const SettingInput& input) {
  const nanoseconds value = parse_duration(text(input));
  if (value <= nanoseconds::zero()) throw std::invalid_argument("must be positive");
  return value;
}

/// An integer from TOML, or a flag's text that is one.
std::size_t count(const SettingInput& input, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  bool read = false;
  if (const auto* number = std::get_if<std::int64_t>(&input)) {
    value = *number, read = true;
  } else if (const auto* flag = std::get_if<FlagText>(&input)) {  // a TOML string is not a number
    const std::string& digits = flag->text;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    read = !digits.empty() && error == std::errc() && end == digits.data() + digits.size();
  }
  if (!read || value < min || value > max) {
    throw std::invalid_argument(fmt::format("must be an integer from {} to {}", min, max));
  }
  return static_cast<std::size_t>(value);
}

std::string absolute_or_none(const SettingInput& input) {
  std::string dir = output_dir_from(text(input));
  if (!dir.empty() && dir.front() != '/') throw std::invalid_argument("an absolute path, or none");
  return dir;
}

std::string http_url(const SettingInput& input) {
  const std::string& url = text(input);
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    throw std::invalid_argument("must be an http:// or https:// URL");
  }
  return url;
}

void listen_address(Settings& settings, const SettingInput& input) {
  const std::string& address = text(input);
  try {
    (void)parse_listen_address(address);
  } catch (const SettingsError&) {
    throw std::invalid_argument("expected [host]:port with a port of 0..65535");
  }
  settings.http = address;
}

// ---- the table

#define FLEETCRON_SET(body) +[](Settings & s, const SettingInput & in) { body; }

const std::array table{
    // Jobs
    SettingSpec{"jobs", "jobs", "JOBS", "", "", "", "Jobs",
                "Jobs files and cron.d directories (crontab syntax; /etc/crontab and cron.d files with their user column)",
                FLEETCRON_SET(s.jobs_paths = paths(in))},
    SettingSpec{"crontab_format", "--crontab-format", "FORMAT", "", "auto", "user, system, auto", "Jobs",
                "Whether job lines have a user column: user (spec, command), system (spec, user, command) or auto "
                "(system for /etc/crontab and /etc/cron.d); a file's own '# fleetcron-file: format=' line wins",
                FLEETCRON_SET(s.crontab_format = crontab_format_from_string(text(in))), true},
    SettingSpec{"seconds", "--seconds", "", "", "false", "", "Jobs", "Job lines have a leading seconds field (6 fields)",
                FLEETCRON_SET(s.seconds = boolean(in))},
    SettingSpec{"watch", "--watch", "", "", "false", "", "Jobs",
                "Reload the jobs files and directories when they change (as SIGHUP; ConfigMap updates too)",
                FLEETCRON_SET(s.watch = boolean(in))},
    SettingSpec{"zone", "--tz", "ZONE", "", "UTC", "an IANA zone", "Jobs", "Zone of jobs without CRON_TZ",
                FLEETCRON_SET(s.zone = text(in))},
    SettingSpec{"replica_id", "--replica-id", "NAME", "FLEETCRON_REPLICA_ID", "host-pid-random", "", "Jobs",
                "This replica's name in the registry, ledger, lease, status and logs; unique among the live replicas "
                "(a daemon whose name a live replica holds exits 2)",
                FLEETCRON_SET(s.replica_id = text(in))},
    // Coordination
    SettingSpec{"coordinator", "--coordinator", "URI", "", "memory", "", "Coordination",
                "memory, redis://…, rediss://… (TLS), redis-sentinel://h1,h2,h3/name, unix:/path, nats://…?bucket=…, "
                "tls://… or postgres://…",
                FLEETCRON_SET(s.coordinator = text(in))},
    SettingSpec{"coordinator_password_file", "--coordinator-password-file", "FILE", "", "", "", "Coordination",
                "File holding the coordinator's password (else FLEETCRON_REDIS_PASSWORD, FLEETCRON_NATS_PASSWORD or "
                "FLEETCRON_POSTGRES_PASSWORD; never passed to the jobs)",
                FLEETCRON_SET(s.coordinator_password_file = text(in))},
    SettingSpec{"coordination", "--coordination", "MODE", "", "claim", "claim, leader, both", "Coordination",
                "How fires are deduplicated across the fleet", FLEETCRON_SET({
                  const auto mode = coordination_mode_from_string(text(in));
                  if (!mode) throw std::invalid_argument("expected claim, leader or both");
                  s.coordination = *mode;
                })},
    SettingSpec{"claim.ttl", "--claim-ttl", "D", "", "10m", "positive", "Coordination",
                "How long a fire claim is kept", FLEETCRON_SET(s.claim_ttl = positive_duration(in))},
    SettingSpec{"claim.max_clock_skew", "--max-clock-skew", "D", "", "5s, or claim TTL / 4 if less", "positive",
                "Coordination", "Claims are refused while the local clock is further than this from the store's",
                FLEETCRON_SET(s.max_clock_skew = positive_duration(in))},
    SettingSpec{"claim.prefix", "--claim-prefix", "P", "", "cron:claim:", "", "Coordination",
                "Redis claim key prefix", FLEETCRON_SET(s.claim_prefix = text(in))},
    SettingSpec{"claim.bucket", "--claim-bucket", "B", "", "FLEETCRON_CLAIMS", "", "Coordination",
                "NATS claims bucket", FLEETCRON_SET(s.claim_bucket = text(in))},
    SettingSpec{"require_noeviction", "--require-noeviction", "", "", "false", "", "Coordination",
                "Refuse to run unless the Redis maxmemory-policy is noeviction",
                FLEETCRON_SET(s.require_noeviction = boolean(in))},
    SettingSpec{"leader.ttl", "--leader-ttl", "D", "", "30s; NATS 10s", "at least 1s", "Coordination",
                "Leadership lease", FLEETCRON_SET(s.leader_ttl = positive_duration(in))},
    SettingSpec{"leader.key", "--leader-key", "K", "", "cron:leader; PostgreSQL cron_leader", "", "Coordination",
                "Leader key", FLEETCRON_SET(s.leader_key = text(in))},
    SettingSpec{"leader.bucket", "--leader-bucket", "B", "", "FLEETCRON_LEADER", "", "Coordination",
                "NATS leader bucket", FLEETCRON_SET(s.leader_bucket = text(in))},
    SettingSpec{"on_leadership_loss", "--on-leadership-loss", "POLICY", "", "finish in both, cancel in leader",
                "cancel, finish", "Coordination", "What running jobs do when leadership is lost", FLEETCRON_SET({
                  const auto policy = leadership_loss_from_string(text(in));
                  if (!policy) throw std::invalid_argument("expected cancel or finish");
                  s.on_leadership_loss = *policy;
                })},
    // Fleet state
    SettingSpec{"fleet.prefix", "--fleet-prefix", "P", "", "the claim prefix with claim: as fleet:", "", "Fleet state",
                "Redis prefix of the fleet state", FLEETCRON_SET(s.fleet_prefix = text(in))},
    SettingSpec{"fleet.bucket", "--fleet-bucket", "B", "", "the claims bucket with CLAIMS as STATE", "", "Fleet state",
                "NATS bucket of the fleet state", FLEETCRON_SET(s.fleet_bucket = text(in))},
    SettingSpec{"fleet.catch_up", "--catch-up", "D", "", "7d", "0 (off) to 366d", "Fleet state",
                "How far back fires missed while the whole fleet was down are caught up",
                FLEETCRON_SET(s.catch_up = parse_catch_up(text(in)))},
    SettingSpec{"fleet.catch_up_beyond_claim_ttl", "--catch-up-beyond-claim-ttl", "", "", "false", "", "Fleet state",
                "Catch up past the claim TTL too: only for a fleet without libtnb/cron replicas",
                FLEETCRON_SET(s.catch_up_beyond_claim_ttl = boolean(in))},
    SettingSpec{"fleet.history", "--history", "N", "", "100", "0 (no ledger) to 10000", "Fleet state",
                "Ledger records kept per job", FLEETCRON_SET(s.history = count(in, 0, 10'000))},
    SettingSpec{"fleet.history_age", "--history-age", "D", "", "30d", "1ms to 400d", "Fleet state",
                "Ledger records older than this go", FLEETCRON_SET(s.history_age = parse_history_age(text(in)))},
    // Daemon
    SettingSpec{"metrics", "--metrics", "HOST:PORT", "", "", "", "Daemon", "Alias of --http", &listen_address},
    SettingSpec{"http", "--http", "HOST:PORT", "", "none", "[host]:port, port 0..65535", "Daemon",
                "Serve the API, the status page, /metrics, /healthz and /readyz (a bare port is loopback)",
                &listen_address},
    SettingSpec{"api_token_file", "--api-token-file", "FILE", "", "none: the API is read-only", "", "Daemon",
                "File holding the bearer token the API's writes need", FLEETCRON_SET(s.api_token_file = text(in))},
    SettingSpec{"log_format", "--log-format", "FORMAT", "", "text", "text, json", "Daemon", "The log's format",
                FLEETCRON_SET({
                  const std::string& format = text(in);
                  if (format != "text" && format != "json") throw std::invalid_argument("expected text or json");
                  s.log_format = format == "json" ? LogFormat::json : LogFormat::text;
                })},
    SettingSpec{"job_metrics", "--job-metrics", "WHICH", "", "all", "all, failing, none", "Daemon",
                "Which jobs /metrics has fleetcron_job_* series for: every job (about 240 bytes a job per scrape), "
                "those to act on (newest run failed, timed out or lost; lost fires; paused), or none (the fleet "
                "state is then not read for them)",
                FLEETCRON_SET({
                  const std::string& which = text(in);
                  if (which != "all" && which != "failing" && which != "none") {
                    throw std::invalid_argument("expected all, failing or none");
                  }
                  s.job_metrics = which == "all"       ? JobMetricsScope::all
                                  : which == "failing" ? JobMetricsScope::failing
                                                       : JobMetricsScope::none;
                })},
    SettingSpec{"shutdown_grace", "--shutdown-grace", "D", "", "30s", "positive", "Daemon",
                "How long SIGTERM lets runs finish", FLEETCRON_SET(s.shutdown_grace = positive_duration(in))},
    SettingSpec{"store_wait", "--store-wait", "D", "", "5m", "0 (for ever) or positive", "Daemon",
                "run: exit 1 if the store has not answered this long after the start; a refused password, database "
                "or certificate exits 2 at once",
                FLEETCRON_SET({
                  const auto* number = std::get_if<std::int64_t>(&in);
                  const bool zero = number != nullptr ? *number == 0 : is_zero_duration(text(in));
                  if (number != nullptr && !zero) throw std::invalid_argument("must be a duration string, or 0");
                  s.store_wait = zero ? nanoseconds::zero() : positive_duration(in);
                })},
    SettingSpec{"kill_grace", "--kill-grace", "D", "", "5s", "positive", "Daemon",
                "SIGTERM to SIGKILL for runs that timed out", FLEETCRON_SET(s.kill_grace = positive_duration(in))},
    SettingSpec{"max_concurrent", "--max-concurrent", "N", "", "64", "1 to 4096", "Daemon", "Runs at once at most",
                FLEETCRON_SET(s.max_concurrent = count(in, 1, 4096))},
    SettingSpec{"max_output_bytes", "", "N", "", "1048576 = 1 MiB", "1 to 1073741824", "Daemon",
                "Output kept of each run (logs, ledger excerpt, fleetcron logs)",
                FLEETCRON_SET(s.max_output_bytes = count(in, 1, std::int64_t{1} << 30))},
    SettingSpec{"output_dir", "--output-dir", "DIR", "",
                "$STATE_DIRECTORY/runs, else /var/lib/fleetcron/runs for root, else ~/.local/state/fleetcron/runs",
                "an absolute path, or none", "Daemon", "Where this host keeps its runs' output for `fleetcron logs`",
                FLEETCRON_SET(s.output_dir = absolute_or_none(in))},
    SettingSpec{"keep_succeeded", "--keep-succeeded", "N", "", "10", "0 to 1000", "Daemon",
                "Succeeded runs' output kept per job (a job's keep-succeeded= says otherwise)",
                FLEETCRON_SET(s.keep_succeeded = count(in, 0, max_kept_runs))},
    SettingSpec{"keep_failed", "--keep-failed", "N", "", "20", "0 to 1000", "Daemon",
                "Failed runs' output kept per job (a job's keep-failed= says otherwise)",
                FLEETCRON_SET(s.keep_failed = count(in, 0, max_kept_runs))},
    // Job defaults: the directives of the same names, for every job that leaves them unset
    SettingSpec{"defaults.dir", "", "DIR", "", "", "", "Job defaults", "Working directory (dir=)",
                FLEETCRON_SET(s.job_defaults.dir = text(in))},
    SettingSpec{"defaults.env_file", "", "FILE", "", "", "", "Job defaults", "Environment file (env-file=)",
                FLEETCRON_SET(s.job_defaults.env_file = text(in))},
    SettingSpec{"defaults.user", "", "USER", "", "", "", "Job defaults", "Account the jobs run as (user=)",
                FLEETCRON_SET(s.job_defaults.user = text(in))},
    SettingSpec{"defaults.on_failure", "", "COMMAND", "", "", "", "Job defaults", "Command run on a failure (on-failure=)",
                FLEETCRON_SET(s.job_defaults.on_failure = text(in))},
    SettingSpec{"defaults.on_lost", "", "COMMAND", "", "", "", "Job defaults", "Command run for a lost run (on-lost=)",
                FLEETCRON_SET(s.job_defaults.on_lost = text(in))},
    SettingSpec{"defaults.on_missed", "", "COMMAND", "", "", "", "Job defaults",
                "Command run for missed fires (on-missed=)", FLEETCRON_SET(s.job_defaults.on_missed = text(in))},
    SettingSpec{"defaults.notify", "", "URL", "", "", "http:// or https://", "Job defaults",
                "Webhook for failures, losses and misses (notify=)", FLEETCRON_SET(s.job_defaults.notify = http_url(in))},
    SettingSpec{"defaults.ping", "", "URL", "", "", "http:// or https://", "Job defaults", "Dead-man ping (ping=)",
                FLEETCRON_SET(s.job_defaults.ping = http_url(in))},
};

#undef FLEETCRON_SET

std::string_view section_of(std::string_view key) {
  const auto dot = key.find('.');
  return dot == std::string_view::npos ? std::string_view{} : key.substr(0, dot);
}

}  // namespace

std::span<const SettingSpec> setting_table() { return table; }

const std::string* shown_text(const SettingInput& input) {
  if (const auto* value = std::get_if<std::string>(&input)) return value;
  if (const auto* flag = std::get_if<FlagText>(&input)) return &flag->text;
  return nullptr;
}

const SettingSpec* find_setting(std::string_view key) {
  for (const SettingSpec& spec : table) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

namespace {

/// A flag's or an environment variable's value onto the settings; `where`
/// names it in the error ("option --claim-ttl").
void apply_given(const SettingSpec& spec, const SettingInput& input, const std::string& where, Settings& settings) {
  try {
    spec.apply(settings, input);
  } catch (const std::invalid_argument& e) {
    const std::string* shown = shown_text(input);
    throw SettingsError(shown != nullptr ? fmt::format("{} \"{}\": {}", where, *shown, e.what())
                                         : fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace

Settings build_settings(const CommandLineSettings& command_line) {
  Settings settings;
  settings.output_dir = default_output_dir();  // the config and the flags may say otherwise
  if (command_line.config) apply_config_file(*command_line.config, settings);
  const auto specs = setting_table();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const SettingSpec& spec = specs[i];
    if (!spec.environment.empty()) {
      const std::string variable(spec.environment);
      if (const char* value = std::getenv(variable.c_str()); value != nullptr) {
        apply_given(spec, FlagText{value}, "environment variable " + variable, settings);
      }
    }
    if (spec.flag == "jobs") {
      if (!command_line.jobs.empty()) settings.jobs_paths = command_line.jobs;
      continue;
    }
    if (i >= command_line.given.size()) continue;
    const CommandLineSettings::Given& given = command_line.given[i];
    if (given.on) apply_given(spec, true, "option " + std::string(spec.flag), settings);
    if (given.text) apply_given(spec, FlagText{*given.text}, "option " + std::string(spec.flag), settings);
  }
  resolve_coordinator_password(settings);
  return settings;
}

std::string known_keys(std::string_view section) {
  std::string keys;
  std::vector<std::string_view> sections;
  for (const SettingSpec& spec : table) {
    const std::string_view in = section_of(spec.key);
    if (in == section) {
      keys += (keys.empty() ? "" : ", ") + std::string(section.empty() ? spec.key : spec.key.substr(in.size() + 1));
    } else if (section.empty() && std::find(sections.begin(), sections.end(), in) == sections.end()) {
      sections.push_back(in);
    }
  }
  for (const std::string_view name : sections) keys += fmt::format(", [{}]", name);
  return keys;
}

}  // namespace fleetcron::daemon
