// fleetcron — durations written as text ("90s", "1h30m", "500ms").
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/error.h"

namespace fleetcron {

/// A duration that does not parse: what() names the text, the 0-based
/// offset and the reason, e.g. `duration "5x": at offset 1: unknown unit "x"`.
class FLEETCRON_API DurationError : public std::invalid_argument, public Error {
 public:
  DurationError(std::string_view text, std::size_t position, std::string reason);
  [[nodiscard]] const char* what() const noexcept override { return std::invalid_argument::what(); }
  [[nodiscard]] std::size_t position() const noexcept { return position_; }
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  std::size_t position_;
  std::string reason_;
};

/// Parses a sequence of <number><unit> terms, as in Go: "90s", "1h30m",
/// "1.5h", "500ms". Units: ns, us (or µs), ms, s, m, h, d (24 h). No sign,
/// no spaces, a unit on every term; "0" alone is zero. The total must not
/// exceed 100 years. Throws DurationError.
[[nodiscard]] FLEETCRON_API std::chrono::nanoseconds parse_duration(std::string_view text);

/// Formats like Go's Duration.String(): "1h30m0s", "500ms", "1.5s", "0s".
[[nodiscard]] FLEETCRON_API std::string format_duration(std::chrono::nanoseconds duration);

}  // namespace fleetcron
