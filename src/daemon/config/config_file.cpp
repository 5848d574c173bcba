// The TOML config file (the only translation unit that includes toml++).
#include <fmt/format.h>

#include <toml++/toml.h>

#include "daemon/config/setting_table.h"

namespace fleetcron::daemon {

namespace {

std::string where(const std::string& path, const toml::node& node) {
  return fmt::format("{}:{}", path, node.source().begin.line);
}

void apply_table(const toml::table& table, const std::string& path, Settings& settings);

/// A TOML value as the setting table takes it; anything else (a float, a
/// date, a table where a value belongs) is an error naming what it is.
SettingInput input_of(const toml::node& node, const std::string& where_text, std::string_view key) {
  if (const auto* value = node.as_string()) return value->get();
  if (const auto* value = node.as_integer()) return value->get();
  if (const auto* value = node.as_boolean()) return value->get();
  if (const auto* list = node.as_array()) {
    std::vector<std::string> items;
    for (const auto& item : *list) {
      const auto* value = item.as_string();
      if (value == nullptr) throw SettingsError(fmt::format("{}: {}: a list of strings only", where_text, key));
      items.push_back(value->get());
    }
    return items;
  }
  throw SettingsError(fmt::format("{}: {}: must be a string, an integer, true or false, or a list of strings",
                                  where_text, key));
}

/// One key, top level or inside [section]: "c.toml:4: claim.ttl \"soon\": reason".
void apply_key(const std::string& key, const toml::node& node, const std::string& path, Settings& settings) {
  const std::string where_text = where(path, node);
  const SettingSpec* spec = find_setting(key);
  if (spec == nullptr && key.find('.') == std::string::npos && !known_keys(key).empty()) {
    throw SettingsError(fmt::format("{}: [{}] must be a table", where_text, key));
  }
  if (spec == nullptr) {
    const auto dot = key.find('.');
    const std::string section = dot == std::string::npos ? std::string() : key.substr(0, dot);
    throw SettingsError(section.empty()
                            ? fmt::format("{}: unknown key {} (known: {})", where_text, key, known_keys())
                            : fmt::format("{}: unknown key {} (known in [{}]: {})", where_text, key, section,
                                          known_keys(section)));
  }
  const SettingInput input = input_of(node, where_text, key);
  try {
    spec->apply(settings, input);
  } catch (const std::invalid_argument& e) {
    const std::string* shown = shown_text(input);
    throw SettingsError(shown != nullptr ? fmt::format("{}: {} \"{}\": {}", where_text, key, *shown, e.what())
                                         : fmt::format("{}: {}: {}", where_text, key, e.what()));
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

void apply_table(const toml::table& table, const std::string& path, Settings& settings) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto* section = node.as_table();
    if (section == nullptr) {
      // A quoted "claim.ttl" at the top is a key of its own, not [claim] ttl.
      if (name.find('.') != std::string::npos) {
        throw SettingsError(fmt::format("{}: unknown key \"{}\" (known: {})", where(path, node), name, known_keys()));
      }
      apply_key(name, node, path, settings);
      continue;
    }
    if (known_keys(name).empty()) {
      throw SettingsError(fmt::format("{}: unknown key {} (known: {})", where(path, node), name, known_keys()));
    }
    for (const auto& [sub_key, sub_node] : *section) apply_key(name + "." + std::string(sub_key.str()), sub_node, path, settings);
  }
}

}  // namespace

}  // namespace fleetcron::daemon
