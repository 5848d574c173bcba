#include "nats/keys.h"

#include <algorithm>

namespace fleetcron::nats::detail {

bool valid_key(std::string_view key) noexcept {
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string_view::npos) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '/' || c == '=' || c == '.' || c == '\\';
  });
}

}  // namespace fleetcron::nats::detail
