// Whether a crontab's job lines have a user column (docs/daemon.md#system-crontabs).
#pragma once

#include <optional>
#include <string_view>

namespace fleetcron::daemon {

enum class CrontabFormat {
  user,    ///< spec, command: a fleetcron jobs file or a user's crontab
  system,  ///< spec, user, command: /etc/crontab and /etc/cron.d files
};

/// "user" or "system".
[[nodiscard]] constexpr std::string_view to_string(CrontabFormat format) noexcept {
  return format == CrontabFormat::system ? "system" : "user";
}

/// "user", "system", or "auto" (nullopt: by path); anything else throws
/// std::invalid_argument naming the choices.
[[nodiscard]] std::optional<CrontabFormat> crontab_format_from_string(std::string_view text);

}  // namespace fleetcron::daemon
