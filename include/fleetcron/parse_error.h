// fleetcron — the error every parser of outside input reports.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/error.h"

namespace fleetcron {

/// A spec (or other text) that does not parse. what() reads like
///   parse "61 * * * *": field minute at offset 0: 61 above maximum 59
/// and the parts are available separately.
class FLEETCRON_API ParseError : public std::invalid_argument, public Error {
 public:
  ParseError(std::string spec, std::string field, std::size_t position, std::string reason);
  [[nodiscard]] const char* what() const noexcept override { return std::invalid_argument::what(); }

  /// The complete input that failed.
  [[nodiscard]] const std::string& spec() const noexcept { return spec_; }
  /// The field at fault: "second", "minute", "hour", "day-of-month",
  /// "month", "day-of-week", "TZ", "CRON_TZ", "descriptor", "@every", or
  /// empty when the error concerns the spec as a whole (e.g. field count).
  [[nodiscard]] const std::string& field() const noexcept { return field_; }
  /// 0-based byte offset into spec() where the problem starts.
  [[nodiscard]] std::size_t position() const noexcept { return position_; }
  /// What is wrong, e.g. "61 above maximum 59".
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  std::string spec_;
  std::string field_;
  std::size_t position_;
  std::string reason_;
};

/// Renders `text` for an error message: printable ASCII as is, anything else
/// as \xNN, cut to `max_bytes` with "..." appended. Never leaks control
/// characters into logs.
[[nodiscard]] FLEETCRON_API std::string quote_for_message(std::string_view text, std::size_t max_bytes = 200);

}  // namespace fleetcron
