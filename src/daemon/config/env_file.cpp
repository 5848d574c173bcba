#include "daemon/config/env_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "daemon/config/jobs_file.h"
#include "fleetcron/parse_error.h"

namespace fleetcron::daemon {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && (is_space(text.back()) || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::optional<Variable> parse_assignment(const SourceLine& line, std::string_view text) {
  std::size_t i = 0;
  if (text.empty() || !is_name_start(text[0])) return std::nullopt;
  while (i < text.size() && is_name_char(text[i])) ++i;
  const std::string_view name = text.substr(0, i);
  while (i < text.size() && is_space(text[i])) ++i;
  if (i >= text.size() || text[i] != '=') return std::nullopt;
  ++i;
  while (i < text.size() && is_space(text[i])) ++i;
  std::string_view value = text.substr(i);
  if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
    const char quote = value.front();
    if (value.size() < 2 || value.back() != quote) line.fail(line.offset_of(value), "unterminated quoted value");
    value = value.substr(1, value.size() - 2);
  }
  return Variable{std::string(name), std::string(value)};
}

/// Fails `line`, which is no NAME=value, at the column where it stops being
/// one. The name is shown, never the rest: an env file holds secrets.
[[noreturn]] void refuse_assignment(const SourceLine& line, std::string_view text) {
  if (!is_name_start(text[0])) {
    line.fail(line.offset_of(text), "expected NAME=value: a name starts with a letter or '_' (the line's text is "
                                    "not shown: env files hold secrets)");
  }
  std::size_t i = 0;
  while (i < text.size() && is_name_char(text[i])) ++i;
  const std::string_view name = text.substr(0, i);
  while (i < text.size() && is_space(text[i])) ++i;
  line.fail(line.offset_of(text.substr(i)),
            fmt::format("expected NAME=value: \"{}\" is not followed by '=' (the rest of the line is not shown: env "
                        "files hold secrets)",
                        quote_for_message(name.substr(0, 64))));
}

std::vector<Variable> load_env_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && static_cast<std::uintmax_t>(info.st_size) > max_env_file_bytes) {
    throw JobsFileError(path, 0, 0, fmt::format("env file of {} bytes, above the limit of {}", info.st_size, max_env_file_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JobsFileError(path, 0, 0, fmt::format("cannot read the env file: {}", std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  const std::string text = content.str();
  if (in.bad()) throw JobsFileError(path, 0, 0, "read error");
  if (text.size() > max_env_file_bytes) {
    throw JobsFileError(path, 0, 0, fmt::format("env file of {} bytes, above the limit of {}", text.size(), max_env_file_bytes));
  }
  std::vector<Variable> variables;
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const SourceLine line{path, ++number, std::string_view(text).substr(start, end - start)};
    start = end + 1;
    std::string_view content_text = trim(line.text);
    if (content_text.empty() || content_text.front() == '#') continue;
    if (content_text.find('\0') != std::string_view::npos) line.fail(line.offset_of(content_text), "NUL byte");
    if (content_text.starts_with("export ")) content_text = trim(content_text.substr(7));
    auto variable = parse_assignment(line, content_text);
    if (!variable) refuse_assignment(line, content_text);
    if (variables.size() >= max_env_file_variables) {
      line.fail(0, fmt::format("more than {} variables", max_env_file_variables));
    }
    variables.push_back(std::move(*variable));
  }
  return variables;
}

}  // namespace fleetcron::daemon
