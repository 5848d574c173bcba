// The TOML config file (the only translation unit that includes toml++).
#include <fmt/format.h>

#include <toml++/toml.h>

#include "daemon/run/run_output.h"
#include "daemon/config/settings.h"
#include "fleetcron/duration.h"

namespace fleetcron::daemon {

namespace {

std::string where(const std::string& path, const toml::node& node) {
  return fmt::format("{}:{}", path, node.source().begin.line);
}

std::string string_value(const std::string& path, const std::string& name, const toml::node& node) {
  const auto* value = node.as_string();
  if (value == nullptr) throw SettingsError(fmt::format("{}: {} must be a string", where(path, node), name));
  return value->get();
}

/// A path, or a list of them: `jobs = "/etc/crontab"`, `jobs = ["/etc/crontab", "/etc/cron.d"]`.
std::vector<std::string> paths_value(const std::string& path, const std::string& name, const toml::node& node) {
  if (node.is_string()) return {string_value(path, name, node)};
  const auto* list = node.as_array();
  if (list == nullptr || list->empty()) {
    throw SettingsError(fmt::format("{}: {} must be a path or a non-empty list of paths", where(path, node), name));
  }
  std::vector<std::string> paths;
  for (const auto& item : *list) paths.push_back(string_value(path, name, item));
  return paths;
}

std::chrono::nanoseconds duration_value(const std::string& path, const std::string& name, const toml::node& node) {
  const std::string text = string_value(path, name, node);
  try {
    const auto value = parse_duration(text);
    if (value <= std::chrono::nanoseconds::zero()) {
      throw SettingsError(fmt::format("{}: {} must be positive, got \"{}\"", where(path, node), name, text));
    }
    return value;
  } catch (const DurationError& e) {
    throw SettingsError(fmt::format("{}: {}: {}", where(path, node), name, e.what()));
  }
}

std::size_t count_value(const std::string& path, const std::string& name, const toml::node& node, std::size_t max,
                        std::int64_t min = 1) {
  const auto* value = node.as_integer();
  if (value == nullptr || value->get() < min || static_cast<std::uint64_t>(value->get()) > max) {
    throw SettingsError(fmt::format("{}: {} must be an integer from {} to {}", where(path, node), name, min, max));
  }
  return static_cast<std::size_t>(value->get());
}

bool bool_value(const std::string& path, const std::string& name, const toml::node& node) {
  const auto* value = node.as_boolean();
  if (value == nullptr) throw SettingsError(fmt::format("{}: {} must be true or false", where(path, node), name));
  return value->get();
}

void apply_table(const toml::table& table, const std::string& path, Settings& settings);

// A catch-up reach: 0 (off) up to 366 days.
std::chrono::nanoseconds catch_up_value(const std::string& path, const std::string& name, const toml::node& node) {
  const std::string text = string_value(path, name, node);
  try {
    return parse_catch_up(text);
  } catch (const std::invalid_argument& e) {
    throw SettingsError(fmt::format("{}: {} \"{}\": {}", where(path, node), name, text, e.what()));
  }
}

SettingsError parse_failure(const std::string& path, const toml::parse_error& e) {
  const auto& begin = e.source().begin;
  if (begin.line == 0) return SettingsError(fmt::format("{}: {}", path, e.description()));
  return SettingsError(fmt::format("{}:{}:{}: {}", path, begin.line, begin.column, e.description()));
}

}  // namespace

void apply_config_file(const std::string& path, Settings& settings) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw parse_failure(path, e);
  }
  apply_table(table, path, settings);
}

void apply_config_text(std::string_view text, const std::string& path, Settings& settings) {
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw parse_failure(path, e);
  }
  apply_table(table, path, settings);
}

namespace {

// [claim], [leader], [fleet] or [defaults].
void apply_section(const std::string& name, const toml::node& node, const std::string& path, Settings& settings) {
  const auto* section = node.as_table();
  if (section == nullptr) throw SettingsError(fmt::format("{}: [{}] must be a table", where(path, node), name));
  for (const auto& [sub_key, sub_node] : *section) {
    const std::string sub(sub_key.str());
    const std::string full = name + "." + sub;
    if (name == "claim" && sub == "ttl") {
      settings.claim_ttl = duration_value(path, full, sub_node);
    } else if (name == "claim" && sub == "max_clock_skew") {
      settings.max_clock_skew = duration_value(path, full, sub_node);
    } else if (name == "claim" && sub == "prefix") {
      settings.claim_prefix = string_value(path, full, sub_node);
    } else if (name == "claim" && sub == "bucket") {
      settings.claim_bucket = string_value(path, full, sub_node);
    } else if (name == "fleet" && sub == "prefix") {
      settings.fleet_prefix = string_value(path, full, sub_node);
    } else if (name == "fleet" && sub == "bucket") {
      settings.fleet_bucket = string_value(path, full, sub_node);
    } else if (name == "fleet" && sub == "catch_up") {
      settings.catch_up = catch_up_value(path, full, sub_node);
    } else if (name == "fleet" && sub == "catch_up_beyond_claim_ttl") {
      settings.catch_up_beyond_claim_ttl = bool_value(path, full, sub_node);
    } else if (name == "fleet" && sub == "history") {
      const auto* value = sub_node.as_integer();
      if (value == nullptr || value->get() < 0 || value->get() > 10'000) {
        throw SettingsError(fmt::format("{}: {} must be an integer from 0 to 10000", where(path, sub_node), full));
      }
      settings.history = static_cast<std::size_t>(value->get());
    } else if (name == "fleet" && sub == "history_age") {
      const std::string text = string_value(path, full, sub_node);
      try {
        settings.history_age = parse_history_age(text);
      } catch (const std::invalid_argument& e) {
        throw SettingsError(fmt::format("{}: {} \"{}\": {}", where(path, sub_node), full, text, e.what()));
      }
    } else if (name == "defaults" && sub == "dir") {
      settings.job_defaults.dir = string_value(path, full, sub_node);
    } else if (name == "defaults" && sub == "env_file") {
      settings.job_defaults.env_file = string_value(path, full, sub_node);
    } else if (name == "defaults" && sub == "user") {
      settings.job_defaults.user = string_value(path, full, sub_node);
    } else if (name == "defaults" && (sub == "on_failure" || sub == "on_lost" || sub == "on_missed")) {
      auto& field = sub == "on_failure" ? settings.job_defaults.on_failure
                    : sub == "on_lost"  ? settings.job_defaults.on_lost
                                        : settings.job_defaults.on_missed;
      field = string_value(path, full, sub_node);
    } else if (name == "defaults" && (sub == "notify" || sub == "ping")) {
      const std::string url = string_value(path, full, sub_node);
      if (!url.starts_with("http://") && !url.starts_with("https://")) {
        throw SettingsError(fmt::format("{}: {} must be an http:// or https:// URL, got \"{}\"", where(path, sub_node), full, url));
      }
      (sub == "notify" ? settings.job_defaults.notify : settings.job_defaults.ping) = url;
    } else if (name == "leader" && sub == "ttl") {
      settings.leader_ttl = duration_value(path, full, sub_node);
    } else if (name == "leader" && sub == "key") {
      settings.leader_key = string_value(path, full, sub_node);
    } else if (name == "leader" && sub == "bucket") {
      settings.leader_bucket = string_value(path, full, sub_node);
    } else {
      throw SettingsError(fmt::format("{}: unknown key {} (known in [{}]: {})", where(path, sub_node), full, name,
                                      name == "claim"   ? "ttl, max_clock_skew, prefix, bucket"
                                      : name == "fleet" ? "prefix, bucket, catch_up, catch_up_beyond_claim_ttl, history, history_age"
                                      : name == "defaults" ? "dir, env_file, user, on_failure, on_lost, on_missed, notify, ping"
                                                           : "ttl, key, bucket"));
    }
  }
}

/// A key of the jobs, the coordinator or its mode; false if `name` is none.
bool apply_source_key(const std::string& name, const toml::node& node, const std::string& path, Settings& settings) {
  if (name == "jobs") {
    settings.jobs_paths = paths_value(path, name, node);
  } else if (name == "replica_id") {
    settings.replica_id = string_value(path, name, node);
  } else if (name == "crontab_format") {
    try {
      settings.crontab_format = crontab_format_from_string(string_value(path, name, node));
    } catch (const std::invalid_argument& e) {
      throw SettingsError(fmt::format("{}: crontab_format {}", where(path, node), e.what()));
    }
  } else if (name == "seconds") {
    settings.seconds = bool_value(path, name, node);
  } else if (name == "watch") {
    settings.watch = bool_value(path, name, node);
  } else if (name == "require_noeviction") {
    settings.require_noeviction = bool_value(path, name, node);
  } else if (name == "zone") {
    settings.zone = string_value(path, name, node);
  } else if (name == "coordinator") {
    settings.coordinator = string_value(path, name, node);
  } else if (name == "coordinator_password_file") {
    settings.coordinator_password_file = string_value(path, name, node);
  } else if (name == "coordination") {
    const std::string text = string_value(path, name, node);
    const auto mode = coordination_mode_from_string(text);
    if (!mode) throw SettingsError(fmt::format("{}: coordination must be claim, leader or both, got \"{}\"", where(path, node), text));
    settings.coordination = *mode;
  } else if (name == "on_leadership_loss") {
    const std::string text = string_value(path, name, node);
    const auto policy = leadership_loss_from_string(text);
    if (!policy) {
      throw SettingsError(fmt::format("{}: on_leadership_loss must be cancel or finish, got \"{}\"", where(path, node), text));
    }
    settings.on_leadership_loss = *policy;
  } else {
    return false;
  }
  return true;
}

/// A key of the daemon's own: HTTP, logs, graces, concurrency, runs'
/// output; false if `name` is none.
bool apply_daemon_key(const std::string& name, const toml::node& node, const std::string& path, Settings& settings) {
  if (name == "http" || name == "metrics") {
    settings.http = string_value(path, name, node);
    try {
      (void)parse_listen_address(settings.http, name);
    } catch (const SettingsError& e) {
      throw SettingsError(fmt::format("{}: {}", where(path, node), e.what()));
    }
  } else if (name == "api_token_file") {
    settings.api_token_file = string_value(path, name, node);
  } else if (name == "log_format") {
    const std::string text = string_value(path, name, node);
    if (text != "text" && text != "json") {
      throw SettingsError(fmt::format("{}: log_format must be text or json, got \"{}\"", where(path, node), text));
    }
    settings.log_format = text == "json" ? LogFormat::json : LogFormat::text;
  } else if (name == "store_wait") {
    const auto* number = node.as_integer();
    if (number != nullptr && number->get() == 0) {
      settings.store_wait = std::chrono::nanoseconds::zero();
    } else {
      settings.store_wait = is_zero_duration(string_value(path, name, node)) ? std::chrono::nanoseconds::zero()
                                                                            : duration_value(path, name, node);
    }
  } else if (name == "shutdown_grace") {
    settings.shutdown_grace = duration_value(path, name, node);
  } else if (name == "kill_grace") {
    settings.kill_grace = duration_value(path, name, node);
  } else if (name == "max_concurrent") {
    settings.max_concurrent = count_value(path, name, node, 4096);
  } else if (name == "max_output_bytes") {
    settings.max_output_bytes = count_value(path, name, node, std::size_t{1} << 30);
  } else if (name == "output_dir") {
    settings.output_dir = output_dir_from(string_value(path, name, node));
    if (!settings.output_dir.empty() && settings.output_dir.front() != '/') {
      throw SettingsError(fmt::format("{}: output_dir \"{}\": an absolute path, or none", where(path, node),
                                      settings.output_dir));
    }
  } else if (name == "keep_succeeded") {
    settings.keep_succeeded = count_value(path, name, node, max_kept_runs, 0);
  } else if (name == "keep_failed") {
    settings.keep_failed = count_value(path, name, node, max_kept_runs, 0);
  } else {
    return false;
  }
  return true;
}

void apply_table(const toml::table& table, const std::string& path, Settings& settings) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (apply_source_key(name, node, path, settings) || apply_daemon_key(name, node, path, settings)) continue;
    if (name == "claim" || name == "leader" || name == "fleet" || name == "defaults") {
      apply_section(name, node, path, settings);
      continue;
    }
    throw SettingsError(fmt::format("{}: unknown key {} (known: jobs, crontab_format, replica_id, seconds, watch, zone, coordinator, coordinator_password_file, coordination, "
                                    "on_leadership_loss, require_noeviction, http, metrics, api_token_file, log_format, shutdown_grace, store_wait, kill_grace, max_concurrent, "
                                    "max_output_bytes, output_dir, keep_succeeded, keep_failed, [claim], [leader], [fleet], [defaults])",
                                    where(path, node), name));
  }
}

}  // namespace

}  // namespace fleetcron::daemon
