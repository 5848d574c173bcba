#include "fleetcron/parse_error.h"

#include <fmt/format.h>

namespace fleetcron {
namespace {

std::string parse_error_message(std::string_view spec, std::string_view field, std::size_t position,
                                std::string_view reason) {
  if (field.empty()) {
    return fmt::format("parse \"{}\": at offset {}: {}", quote_for_message(spec), position, reason);
  }
  return fmt::format("parse \"{}\": field {} at offset {}: {}", quote_for_message(spec), field, position, reason);
}

}  // namespace

ParseError::ParseError(std::string spec, std::string field, std::size_t position, std::string reason)
    : std::invalid_argument(parse_error_message(spec, field, position, reason)),
      spec_(std::move(spec)),
      field_(std::move(field)),
      position_(position),
      reason_(std::move(reason)) {}

std::string quote_for_message(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max_bytes) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '"' || byte == '\\') {
      out += '\\';
      out += static_cast<char>(byte);
    } else if (byte >= 0x20 && byte < 0x7f) {
      out += static_cast<char>(byte);
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

}  // namespace fleetcron
