// The daemon's settings, each declared once: its TOML key, flag,
// environment variable, default, range and help. The command line's flags
// and --help (cli/main.cpp), the TOML reader (config_file.cpp), and the
// tables in docs/daemon.md and fleetcron(1) (`fleetcron settings`) are all
// made from this table; a setting added here is in all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "daemon/config/settings.h"

namespace fleetcron::daemon {

/// A flag's or an environment variable's text: unlike a TOML string, it
/// may spell a number (`--history 20`; the file says `history = 20`).
struct FlagText {
  std::string text;
};
/// A setting's value as given: a TOML string, integer, boolean or list of
/// strings, or a flag's text (true for a switch).
using SettingInput = std::variant<std::string, std::int64_t, bool, std::vector<std::string>, FlagText>;
/// The text of a string or a flag, for error messages; nullptr otherwise.
[[nodiscard]] const std::string* shown_text(const SettingInput& input);

/// One setting.
struct SettingSpec {
  /// The TOML key, "section.key" inside a table ([claim] ttl: "claim.ttl").
  std::string_view key;
  /// The flag ("--claim-ttl"); "jobs" for the positional JOBS; empty: TOML only.
  std::string_view flag;
  /// What the flag takes, for --help and the docs ("D", "N", "URI"); empty: a switch.
  std::string_view value_name;
  /// Read before the flag and after the file; empty: none.
  std::string_view environment;
  /// The default as the docs say it, and the accepted range or values.
  std::string_view default_text;
  std::string_view range;
  /// --help's group: Jobs, Coordination, Fleet state, Daemon, Job defaults.
  std::string_view group;
  std::string_view help;
  /// Sets the value; throws std::invalid_argument saying what is wrong
  /// with it (the caller adds where: the flag, or file and line).
  void (*apply)(Settings& settings, const SettingInput& input);
  /// Its flag only on the commands that read jobs files (run, validate).
  bool jobs_commands_only = false;
};

/// Every setting, in the order they are documented (and applied: a later
/// one wins over an earlier, so --http comes after its alias --metrics).
[[nodiscard]] std::span<const SettingSpec> setting_table();
/// The setting with this TOML key, or nullptr.
[[nodiscard]] const SettingSpec* find_setting(std::string_view key);
/// The TOML keys, top level and [section] by [section], for "unknown key" errors.
[[nodiscard]] std::string known_keys(std::string_view section = {});

/// What the command line gave: the config file, the positional jobs, and
/// per setting (setting_table()'s order) a flag's text or a switch.
struct CommandLineSettings {
  struct Given {
    std::optional<std::string> text;
    bool on = false;  // a switch (--seconds)
  };
  std::optional<std::string> config;
  std::vector<std::string> jobs;
  std::vector<Given> given = std::vector<Given>(setting_table().size());
};

/// Defaults, then the TOML file, then per setting its environment variable
/// and its flag; then the coordinator's password (resolve_coordinator_password).
/// Throws SettingsError naming the file and line, the variable, or the
/// option and its value.
[[nodiscard]] Settings build_settings(const CommandLineSettings& command_line);

/// `fleetcron settings`: the table as Markdown (docs/daemon.md) or as the
/// OPTIONS of fleetcron(1) (troff).
[[nodiscard]] std::string settings_markdown();
[[nodiscard]] std::string settings_man();

}  // namespace fleetcron::daemon
