// `fleetcron settings`: the setting table as the docs show it — a Markdown
// table for docs/daemon.md and the OPTIONS of fleetcron(1) — so the docs
// come from the same declarations as the flags and the TOML reader
// (tests/cli/daemon_cli_test.sh checks that both files hold its output).
#include <fmt/format.h>

#include "daemon/config/setting_table.h"

namespace fleetcron::daemon {

namespace {

std::string code_or_dash(std::string_view text) { return text.empty() ? "–" : fmt::format("`{}`", text); }

std::string flag_shown(const SettingSpec& spec) {
  if (spec.flag.empty()) return {};
  if (spec.flag == "jobs") return std::string(spec.value_name);
  return spec.value_name.empty() ? std::string(spec.flag) : fmt::format("{} {}", spec.flag, spec.value_name);
}

/// troff: hyphens of options as \-, and ASCII only (groff warns otherwise).
std::string troff(std::string_view text, bool option) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("…")) {
      out += "...";
      i += std::string_view("…").size() - 1;
    } else if (text[i] == '-' && option) {
      out += "\\-";
    } else if (text[i] == '\\') {
      out += "\\e";
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string man_heading(const SettingSpec& spec) {
  if (spec.flag.empty()) return fmt::format(".B {}\n", spec.key);
  if (spec.flag == "jobs") return fmt::format(".I {}\n", spec.value_name);
  if (spec.value_name.empty()) return fmt::format(".B {}\n", troff(spec.flag, true));
  return fmt::format(".BI {} \" {}\"\n", troff(spec.flag, true), spec.value_name);
}

}  // namespace

std::string settings_markdown() {
  std::string out =
      "| flag | TOML key | environment | default | values | what |\n"
      "|---|---|---|---|---|---|\n";
  for (const SettingSpec& spec : setting_table()) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", code_or_dash(flag_shown(spec)), code_or_dash(spec.key),
                       code_or_dash(spec.environment), spec.default_text.empty() ? "–" : spec.default_text,
                       spec.range.empty() ? "–" : spec.range, spec.help);
  }
  return out;
}

std::string settings_man() {
  std::string out;
  for (const SettingSpec& spec : setting_table()) {
    out += ".TP\n" + man_heading(spec);
    std::string text = troff(spec.help, false) + ".";
    if (!spec.default_text.empty() && spec.default_text != "false") {
      text += fmt::format(" Default: {}.", troff(spec.default_text, false));
    }
    if (!spec.range.empty()) text += fmt::format(" Values: {}.", troff(spec.range, false));
    if (spec.flag.empty()) {
      text += " In the TOML file only.";
    } else if (spec.flag != "jobs") {
      text += fmt::format(" TOML: \\fB{}\\fR.", spec.key);
    }
    if (!spec.environment.empty()) text += fmt::format(" Environment: \\fB{}\\fR.", spec.environment);
    out += text + "\n";
  }
  return out;
}

}  // namespace fleetcron::daemon
