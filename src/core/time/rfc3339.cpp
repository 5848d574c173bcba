#include "fleetcron/rfc3339.h"

#include <fmt/format.h>

#include <cstdint>

#include "core/time/rfc3339_writer.h"
#include "fleetcron/parse_error.h"

namespace fleetcron {
namespace {

using namespace std::chrono;

constexpr std::string_view time_field = "time";

// A cursor over RFC 3339 text that reports the first wrong character.
class TimeReader {
 public:
  explicit TimeReader(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(std::size_t position, std::string reason) const {
    throw ParseError(std::string(text_), std::string(time_field), position, std::move(reason));
  }

  int digits(int count, int min, int max, std::string_view what) {
    const std::size_t start = pos_;
    int value = 0;
    for (int i = 0; i < count; ++i) {
      if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
        fail(pos_, fmt::format("expected {} digits of the {}", count, what));
      }
      value = value * 10 + (text_[pos_] - '0');
      ++pos_;
    }
    if (value < min || value > max) fail(start, fmt::format("{} {} out of range {}–{}", what, value, min, max));
    return value;
  }

  void expect(std::string_view accepted, std::string_view what) {
    if (pos_ >= text_.size() || accepted.find(text_[pos_]) == std::string_view::npos) {
      fail(pos_, fmt::format("expected {}", what));
    }
    ++pos_;
  }

  bool accept(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  std::int64_t fraction_ns() {
    std::int64_t value = 0;
    int count = 0;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (count == 9) fail(pos_, "more than 9 fractional digits");
      value = value * 10 + (text_[pos_] - '0');
      ++count;
      ++pos_;
    }
    if (count == 0) fail(start, "expected digits after '.'");
    for (; count < 9; ++count) value *= 10;
    return value;
  }

  std::size_t position() const { return pos_; }
  bool at_end() const { return pos_ == text_.size(); }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

// Writes `value` as exactly `width` digits (value is in range).
char* put_digits(char* out, std::int64_t value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + width;
}

}  // namespace

namespace detail {

// Hand-rolled rather than fmt: every fire key goes through here, once per
// run, and fmt's general machinery cost more than the rest of a dispatch.
std::size_t write_rfc3339(char* buffer, Instant at, TimeZone zone) noexcept {
  // RFC 3339 offsets have whole minutes; a historical offset with seconds
  // (e.g. Africa/Monrovia, -00:44:30 until 1972) is rounded, and the wall
  // time printed with the rounded offset, so the text parses back exactly.
  const seconds offset = zone.is_utc() ? seconds{0} : round<minutes>(zone.offset_at(at));
  const auto local = at + offset;  // wall clock as a sys_time-shaped value
  const auto day = floor<days>(local);
  const year_month_day ymd{day};
  const hh_mm_ss<nanoseconds> tod{local - day};
  char* out = buffer;
  out = put_digits(out, int(ymd.year()), 4);
  *out++ = '-';
  out = put_digits(out, unsigned(ymd.month()), 2);
  *out++ = '-';
  out = put_digits(out, unsigned(ymd.day()), 2);
  *out++ = 'T';
  out = put_digits(out, tod.hours().count(), 2);
  *out++ = ':';
  out = put_digits(out, tod.minutes().count(), 2);
  *out++ = ':';
  out = put_digits(out, tod.seconds().count(), 2);
  if (std::int64_t ns = tod.subseconds().count(); ns != 0) {
    int digits = 9;
    while (ns % 10 == 0) {
      ns /= 10;
      --digits;
    }
    *out++ = '.';
    out = put_digits(out, ns, digits);
  }
  if (zone.is_utc()) {
    *out++ = 'Z';
  } else {
    const auto minutes_total = duration_cast<minutes>(offset).count();
    const auto magnitude = minutes_total < 0 ? -minutes_total : minutes_total;
    *out++ = minutes_total < 0 ? '-' : '+';
    out = put_digits(out, magnitude / 60, 2);
    *out++ = ':';
    out = put_digits(out, magnitude % 60, 2);
  }
  return static_cast<std::size_t>(out - buffer);
}

}  // namespace detail

std::string format_rfc3339(Instant at, TimeZone zone) {
  char buffer[detail::rfc3339_max_bytes];
  return std::string(buffer, detail::write_rfc3339(buffer, at, zone));
}

Instant parse_rfc3339(std::string_view text) {
  TimeReader in(text);
  const int year_value = in.digits(4, 1900, 2199, "year");
  in.expect("-", "'-' after the year");
  const int month_value = in.digits(2, 1, 12, "month");
  in.expect("-", "'-' after the month");
  const std::size_t day_position = in.position();
  const int day_value = in.digits(2, 1, 31, "day");
  const year_month_day ymd{year{year_value}, month{unsigned(month_value)}, day{unsigned(day_value)}};
  if (!ymd.ok()) in.fail(day_position, fmt::format("day {} does not exist in {:04}-{:02}", day_value, year_value, month_value));
  in.expect("Tt ", "'T' between date and time");
  const int hour_value = in.digits(2, 0, 23, "hour");
  in.expect(":", "':' after the hour");
  const int minute_value = in.digits(2, 0, 59, "minute");
  in.expect(":", "':' after the minute");
  const int second_value = in.digits(2, 0, 59, "second");
  std::int64_t fraction = 0;
  if (in.accept('.')) fraction = in.fraction_ns();
  seconds offset{0};
  if (in.peek() == 'Z' || in.peek() == 'z') {
    in.accept(in.peek());
  } else if (in.peek() == '+' || in.peek() == '-') {
    const bool negative = in.peek() == '-';
    in.accept(in.peek());
    const int offset_hours = in.digits(2, 0, 23, "offset hours");
    in.expect(":", "':' in the offset");
    const int offset_minutes = in.digits(2, 0, 59, "offset minutes");
    offset = hours{offset_hours} + minutes{offset_minutes};
    if (negative) offset = -offset;
  } else {
    in.fail(in.position(), "expected 'Z' or an offset like +02:00 (the offset is required)");
  }
  if (!in.at_end()) in.fail(in.position(), "unexpected text after the time");
  const auto local = sys_days{ymd} + hours{hour_value} + minutes{minute_value} + seconds{second_value};
  return Instant{local - offset} + nanoseconds{fraction};
}

}  // namespace fleetcron
