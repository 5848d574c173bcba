// Internal: one Redis reply, decoded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fleetcron::redis {

struct Reply {
  enum class Type { nil, status, error, integer, string, array };
  Type type = Type::nil;
  std::string text;  // status, error and string replies
  long long integer = 0;
  std::vector<Reply> elements;  // array replies

  [[nodiscard]] bool is_error() const noexcept { return type == Type::error; }
  [[nodiscard]] bool is_nil() const noexcept { return type == Type::nil; }
  /// An error reply whose code (first word) is `code`, e.g. "NOSCRIPT".
  [[nodiscard]] bool is_error(std::string_view code) const noexcept;
};
[[nodiscard]] std::string_view to_string(Reply::Type type) noexcept;

}  // namespace fleetcron::redis
