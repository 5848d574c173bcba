// Internal, header-only (the backends include it): percent-decoding of the
// user information in coordinator URIs.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fleetcron::detail {

/// `text` with every %XX replaced by its byte; nullopt, with the offset of
/// the bad escape in `bad_at`, for an incomplete or invalid one.
inline std::optional<std::string> percent_decode(std::string_view text, std::size_t& bad_at) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    unsigned value = 0;
    const char* first = text.data() + i + 1;
    if (i + 2 >= text.size() ||
        std::from_chars(first, first + 2, value, 16).ptr != first + 2) {
      bad_at = i;
      return std::nullopt;
    }
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

}  // namespace fleetcron::detail
