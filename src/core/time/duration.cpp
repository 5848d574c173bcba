#include "fleetcron/duration.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>

#include "fleetcron/parse_error.h"

namespace fleetcron {
namespace {

using std::chrono::nanoseconds;

constexpr std::int64_t ns_per_hour = 3'600'000'000'000;
constexpr std::int64_t max_duration_ns = 100 * 366 * 24 * ns_per_hour;  // "100 years"
static_assert(max_duration_ns < std::numeric_limits<std::int64_t>::max() / 2);
constexpr int max_fraction_digits = 9;

struct Unit {
  std::string_view name;
  std::int64_t ns;
};
// Longest names first so "ms" is not read as "m".
constexpr std::array<Unit, 8> units{{
    {"ns", 1},
    {"us", 1'000},
    {"\xC2\xB5s", 1'000},  // µs (U+00B5)
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", ns_per_hour},
    {"d", 24 * ns_per_hour},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

DurationError::DurationError(std::string_view text, std::size_t position, std::string reason)
    : std::invalid_argument(
          fmt::format("duration \"{}\": at offset {}: {}", quote_for_message(text), position, reason)),
      position_(position),
      reason_(std::move(reason)) {}

namespace {

/// The unit of the term that started at `term_start`, whose number ends at
/// `pos`: the longest unit name there, refused when its letters run on
/// into a word ("5min", "2hours") or when none is there.
const Unit& read_unit(std::string_view text, std::size_t pos, std::size_t term_start) {
  const Unit* unit = nullptr;
  for (const auto& candidate : units) {
    if (text.substr(pos, candidate.name.size()) == candidate.name &&
        (unit == nullptr || candidate.name.size() > unit->name.size())) {
      unit = &candidate;
    }
  }
  if (unit == nullptr) {
    std::size_t end = pos;
    while (end < text.size() && !is_digit(text[end]) && text[end] != '.') ++end;
    if (end == pos) throw DurationError(text, pos, "missing unit (ns, us, ms, s, m, h or d)");
    throw DurationError(text, pos, fmt::format("unknown unit \"{}\" (known: ns, us, ms, s, m, h, d)",
                                               quote_for_message(text.substr(pos, end - pos))));
  }
  std::size_t word_end = pos;
  while (word_end < text.size() &&
         ((text[word_end] >= 'a' && text[word_end] <= 'z') || (text[word_end] >= 'A' && text[word_end] <= 'Z'))) {
    ++word_end;
  }
  if (word_end > pos + unit->name.size()) {
    throw DurationError(text, pos,
                        fmt::format("unknown unit \"{}\" (known: ns, us, ms, s, m, h, d; e.g. {}{})",
                                    quote_for_message(text.substr(pos, word_end - pos)),
                                    quote_for_message(text.substr(term_start, pos - term_start)), unit->name));
  }
  return *unit;
}

}  // namespace

nanoseconds parse_duration(std::string_view text) {
  if (text.empty()) throw DurationError(text, 0, "empty duration");
  if (text == "0") return nanoseconds{0};
  std::int64_t total_ns = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t term_start = pos;
    if (!is_digit(text[pos]) && text[pos] != '.') {
      throw DurationError(text, pos, fmt::format("expected a number, found '{}'", quote_for_message(text.substr(pos, 1))));
    }
    std::int64_t whole = 0;
    bool any_digit = false;
    while (pos < text.size() && is_digit(text[pos])) {
      const int digit = text[pos] - '0';
      if (whole > (max_duration_ns - digit) / 10) throw DurationError(text, term_start, "number too large");
      whole = whole * 10 + digit;
      any_digit = true;
      ++pos;
    }
    std::int64_t fraction = 0;
    int fraction_digits = 0;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      while (pos < text.size() && is_digit(text[pos])) {
        if (fraction_digits == max_fraction_digits) throw DurationError(text, pos, "more than 9 fractional digits");
        fraction = fraction * 10 + (text[pos] - '0');
        ++fraction_digits;
        any_digit = true;
        ++pos;
      }
    }
    if (!any_digit) throw DurationError(text, term_start, "expected a number");
    const std::size_t unit_start = pos;
    const Unit* unit = &read_unit(text, pos, term_start);
    pos += unit->name.size();
    if (whole > max_duration_ns / unit->ns) throw DurationError(text, term_start, "duration above 100 years");
    std::int64_t term_ns = whole * unit->ns;
    if (fraction_digits > 0) {
      long double scale = 1;
      for (int i = 0; i < fraction_digits; ++i) scale *= 10;
      term_ns += static_cast<std::int64_t>(static_cast<long double>(fraction) * static_cast<long double>(unit->ns) / scale);
    }
    total_ns += term_ns;
    if (total_ns > max_duration_ns) throw DurationError(text, unit_start, "duration above 100 years");
  }
  return nanoseconds{total_ns};
}

std::string format_duration(nanoseconds duration) {
  std::int64_t ns = duration.count();
  if (ns == 0) return "0s";
  std::string out;
  if (ns < 0) {
    out += '-';
    ns = ns == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max() : -ns;
  }
  auto with_fraction = [&](std::int64_t value, std::int64_t per_unit, std::string_view unit) {
    out += fmt::format("{}", value / per_unit);
    if (std::int64_t rest = value % per_unit; rest != 0) {
      std::string digits = fmt::format("{}", rest);
      std::string fraction = std::string(std::to_string(per_unit).size() - 1 - digits.size(), '0') + digits;
      while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
      out += '.' + fraction;
    }
    out += unit;
  };
  if (ns < 1'000) {
    out += fmt::format("{}ns", ns);
  } else if (ns < 1'000'000) {
    with_fraction(ns, 1'000, "us");
  } else if (ns < 1'000'000'000) {
    with_fraction(ns, 1'000'000, "ms");
  } else {
    const std::int64_t hours = ns / ns_per_hour;
    const std::int64_t minutes = (ns % ns_per_hour) / 60'000'000'000;
    if (hours > 0) out += fmt::format("{}h", hours);
    if (hours > 0 || minutes > 0) out += fmt::format("{}m", minutes);
    with_fraction(ns % 60'000'000'000, 1'000'000'000, "s");
  }
  return out;
}

}  // namespace fleetcron
