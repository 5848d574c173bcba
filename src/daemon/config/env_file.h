// NAME=value assignments: the jobs file's environment lines and the
// dotenv files of env-file=.
//
//   # a comment
//   export NAME=value        "export " is optional
//   NAME="value with blanks" quotes ("…" or '…') are removed, nothing escapes
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/config/job_directives.h"

namespace fleetcron::daemon {

using Variable = std::pair<std::string, std::string>;

/// NAME=value, NAME = value, NAME="value", NAME='value' (`text` trimmed).
/// nullopt if the text is not an assignment; a JobsFileError for an
/// unterminated quote.
[[nodiscard]] std::optional<Variable> parse_assignment(const SourceLine& line, std::string_view text);

/// Limits of an env file: 256 KiB, 4,096 variables.
inline constexpr std::size_t max_env_file_bytes = 256 * 1024;
inline constexpr std::size_t max_env_file_variables = 4096;

/// Reads a dotenv file; every error is a JobsFileError naming the file
/// and line (line 0: the file itself cannot be read).
[[nodiscard]] std::vector<Variable> load_env_file(const std::string& path);

}  // namespace fleetcron::daemon
