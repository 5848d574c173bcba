// Internal, header-only: the text fields of the records the stores keep
// (fire records, job controls): percent-encoded text with "-" for empty,
// numbers, and instants as microseconds since the epoch.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/support/percent_decoding.h"
#include "fleetcron/time.h"

namespace fleetcron::detail {

/// Percent-encodes '%', space, controls and DEL; "-" stands for empty.
inline std::string encode_text(std::string_view text) {
  if (text.empty()) return "-";
  if (text == "-") return "%2D";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '%' || byte <= 0x20 || byte == 0x7f) {
      out += fmt::format("%{:02X}", byte);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

inline std::optional<std::string> decode_text(std::string_view field) {
  if (field == "-") return std::string();
  std::size_t bad_at = 0;
  return percent_decode(field, bad_at);
}

inline std::string micros_text(const std::optional<Instant>& at) {
  if (!at) return "-";
  return std::to_string(std::chrono::floor<std::chrono::microseconds>(*at).time_since_epoch().count());
}

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc{} && end == text.data() + text.size();
}

template <typename Number>
bool parse_optional(std::string_view text, std::optional<Number>& out) {
  if (text == "-") return true;
  Number value{};
  if (!parse_number(text, value)) return false;
  out = value;
  return true;
}

/// The fields of a line, split at each space.
inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const auto space = line.find(' ');
    fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos) return fields;
    line.remove_prefix(space + 1);
  }
}

/// A document of one record per line (none for an empty one), each read
/// by `parse_line`; nullopt if any line is not a record.
template <typename ParseLine>
auto parse_lines(std::string_view text, ParseLine parse_line)
    -> std::optional<std::vector<typename decltype(parse_line(text))::value_type>> {
  std::vector<typename decltype(parse_line(text))::value_type> records;
  while (!text.empty()) {
    const auto end = text.find('\n');
    auto record = parse_line(text.substr(0, end));
    if (!record) return std::nullopt;
    records.push_back(std::move(*record));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return records;
}

/// "-" (nullopt) or microseconds within Instant's range.
inline bool parse_instant(std::string_view text, std::optional<Instant>& out) {
  constexpr std::int64_t max_micros = std::chrono::nanoseconds::max().count() / 1000;
  std::optional<std::int64_t> micros;
  if (!parse_optional(text, micros)) return false;
  if (micros && (*micros > max_micros || *micros < -max_micros)) return false;
  if (micros) out = Instant{std::chrono::microseconds{*micros}};
  return true;
}

}  // namespace fleetcron::detail
