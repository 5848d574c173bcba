#include "nats/keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "fleetcron/nats/elector.h"

namespace fleetcron::nats::detail {

bool valid_key(std::string_view key) noexcept {
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string_view::npos) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '/' || c == '=' || c == '.' || c == '\\';
  });
}

}  // namespace fleetcron::nats::detail

namespace fleetcron::nats {

void check_key(std::string_view key) {
  if (!detail::valid_key(key)) {
    throw std::invalid_argument(fmt::format("\"{}\" is not a valid NATS key (letters, digits, _ - / = . and \\; no "
                                            "leading, trailing or doubled '.')",
                                            key));
  }
}

}  // namespace fleetcron::nats
