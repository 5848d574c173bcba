#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/schedule/cron_fields.h"
#include "core/schedule/cron_schedule.h"
#include "core/schedule/interval_schedule.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"

namespace fleetcron {
namespace {

using detail::CronFields;

enum class Field { second, minute, hour, day_of_month, month, day_of_week, year };

struct FieldInfo {
  std::string_view name;
  unsigned min;
  unsigned max;
};

constexpr std::array<FieldInfo, 7> field_info{{
    {"second", 0, 59},
    {"minute", 0, 59},
    {"hour", 0, 23},
    {"day-of-month", 1, 31},
    {"month", 1, 12},
    {"day-of-week", 0, 7},
    {"year", CronFields::first_year, CronFields::last_year},
}};

constexpr std::array<std::string_view, 12> month_names{"jan", "feb", "mar", "apr", "may", "jun",
                                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> weekday_names{"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

// Numbers above this are rejected before they can overflow.
constexpr unsigned max_number = 1'000'000;
constexpr std::size_t max_fields = 7;

constexpr FieldInfo info_of(Field field) { return field_info[static_cast<std::size_t>(field)]; }

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Built with += rather than "'" + s + "'": g++ 12 at -O3 reports a false
// -Wrestrict on the latter (GCC bug 105329).
std::string describe_char(char c) {
  std::string out(1, '\'');
  out += quote_for_message(std::string_view(&c, 1));
  out += '\'';
  return out;
}

struct Token {
  std::size_t begin;  // offset in the spec
  std::string_view text;
};

// One parse of one spec. Every error names the field and the offset in the
// original spec text.
class SpecParser {
 public:
  SpecParser(std::string_view spec, const ParseOptions& options) : spec_(spec), options_(options) {}

  SchedulePtr parse() {
    if (spec_.size() > max_spec_bytes) fail("", max_spec_bytes, fmt::format("spec longer than {} bytes", max_spec_bytes));
    std::size_t pos = skip_space(0);
    TimeZone zone = options_.zone;
    if (starts_with_prefix(pos, "TZ=") || starts_with_prefix(pos, "CRON_TZ=")) pos = parse_zone(pos, zone);
    if (pos == spec_.size()) fail("", pos, "empty spec");
    if (spec_[pos] == '@') return parse_descriptor(pos, zone);
    return parse_fields(pos, zone);
  }

 private:
  [[noreturn]] void fail(std::string_view field, std::size_t position, std::string reason) const {
    throw ParseError(std::string(spec_), std::string(field), position, std::move(reason));
  }

  std::size_t skip_space(std::size_t pos) const {
    while (pos < spec_.size() && is_space(spec_[pos])) ++pos;
    return pos;
  }

  Token next_token(std::size_t pos) const {
    std::size_t end = pos;
    while (end < spec_.size() && !is_space(spec_[end])) ++end;
    return Token{pos, spec_.substr(pos, end - pos)};
  }

  bool starts_with_prefix(std::size_t pos, std::string_view prefix) const {
    return spec_.substr(pos, prefix.size()) == prefix;
  }

  std::size_t parse_zone(std::size_t pos, TimeZone& zone) {
    const std::string_view field = spec_[pos] == 'T' ? "TZ" : "CRON_TZ";
    const std::size_t name_pos = pos + field.size() + 1;
    const Token name = next_token(name_pos);
    if (name.text.empty()) fail(field, name_pos, "empty time zone");
    try {
      zone = TimeZone::locate(name.text);
    } catch (const std::invalid_argument&) {
      fail(field, name_pos, fmt::format("unknown time zone \"{}\"", quote_for_message(name.text)));
    }
    const std::size_t after = skip_space(name_pos + name.text.size());
    if (after == spec_.size()) fail(field, after, "missing schedule after the time zone");
    zone_field_ = field;
    zone_position_ = pos;
    return after;
  }

  SchedulePtr parse_descriptor(std::size_t pos, TimeZone zone) {
    const Token word = next_token(pos);
    const std::size_t after = skip_space(pos + word.text.size());
    if (equals_ignoring_case(word.text, "@every")) {
      if (zone_position_) fail(zone_field_, *zone_position_, "a time zone has no effect on @every (a fixed interval)");
      return parse_every(after);
    }
    CronFields fields;
    fields.seconds = 1;
    fields.minutes = 1;
    fields.hours = 1;
    fields.days_of_month = 0xFFFF'FFFEu;
    fields.months = 0x1FFE;
    fields.days_of_week = 0x7F;
    fields.day_of_month_star = true;
    fields.day_of_week_star = true;
    const auto is = [&](std::string_view name) { return equals_ignoring_case(word.text, name); };
    if (is("@yearly") || is("@annually")) {
      fields.days_of_month = 1u << 1;
      fields.months = 1u << 1;
      fields.day_of_month_star = false;
    } else if (is("@monthly")) {
      fields.days_of_month = 1u << 1;
      fields.day_of_month_star = false;
    } else if (is("@weekly")) {
      fields.days_of_week = 1u << 0;
      fields.day_of_week_star = false;
    } else if (is("@daily") || is("@midnight")) {
      // midnight, every day
    } else if (is("@hourly")) {
      fields.hours = CronFields::all_hours;
    } else {
      fail("descriptor", pos, fmt::format("unknown descriptor \"{}\"", quote_for_message(word.text)));
    }
    if (after != spec_.size()) fail("descriptor", after, "unexpected text after the descriptor");
    fields.finish();
    return std::make_shared<detail::CronSchedule>(std::string(spec_), fields, zone, options_.dst);
  }

  SchedulePtr parse_every(std::size_t pos) const {
    const Token text = next_token(pos);
    if (text.text.empty()) fail("@every", pos, "missing duration, e.g. @every 90s");
    std::chrono::nanoseconds interval{};
    try {
      interval = parse_duration(text.text);
    } catch (const DurationError& error) {
      fail("@every", pos + error.position(), error.reason());
    }
    if (interval < min_interval) {
      fail("@every", pos, fmt::format("interval {} below minimum {}", format_duration(interval), format_duration(min_interval)));
    }
    if (interval > max_interval) {
      fail("@every", pos, fmt::format("interval {} above maximum {}", format_duration(interval), format_duration(max_interval)));
    }
    const std::size_t after = skip_space(pos + text.text.size());
    if (after != spec_.size()) fail("@every", after, "unexpected text after the duration");
    std::optional<Instant> anchor;
    if (options_.every_anchor == EveryAnchor::epoch) anchor = Instant{};
    return detail::make_interval_schedule(interval, anchor, std::string(spec_));
  }

  SchedulePtr parse_fields(std::size_t pos, TimeZone zone) {
    std::array<Token, max_fields> tokens{};
    std::size_t count = 0;
    std::size_t first_extra = 0;
    while (pos < spec_.size()) {
      const Token token = next_token(pos);
      if (count < max_fields) tokens[count] = token;
      if (count == max_fields) first_extra = token.begin;
      ++count;
      pos = skip_space(pos + token.text.size());
    }
    const std::size_t first = check_field_count(count, first_extra, tokens);
    CronFields fields;
    if (first == 1) fields.seconds = 1;  // second 0
    for (std::size_t i = 0; i < count; ++i) {
      const auto field = static_cast<Field>(i + first);
      parse_field(field, tokens[i], fields);
      // Vixie cron's HR_STAR: an hour field that starts with '*' (`*/2`)
      // is a wildcard for the daylight-saving rules.
      if (field == Field::hour && tokens[i].text.starts_with('*')) fields.hour_star = true;
      if (field == Field::year) fields.any_year = tokens[i].text == "*";
    }
    fields.finish();
    return std::make_shared<detail::CronSchedule>(std::string(spec_), fields, zone, options_.dst);
  }

  // Returns the Field index of the first token (0 with seconds, 1 without).
  // A year comes last: 6 fields without seconds (and then it must name a
  // year, so a seconds-first spec is never read as one), 7 with seconds.
  std::size_t check_field_count(std::size_t count, std::size_t first_extra, const std::array<Token, max_fields>& tokens) const {
    const SecondsField mode = options_.seconds;
    if (count == 5 && mode != SecondsField::required) return 1;
    if (count == 6 && mode != SecondsField::none) return 0;
    if (count == 7 && mode != SecondsField::none) return 0;
    if (count == 6 && names_a_year(tokens[5].text)) return 1;
    const std::string expected = mode == SecondsField::none       ? "5 fields, or 6 with a year last"
                                 : mode == SecondsField::optional ? "5 fields, 6 (seconds first) or 7 (seconds first, a year last)"
                                                                  : "6 fields (seconds first), or 7 with a year last";
    const std::size_t allowed = mode == SecondsField::none ? 6 : 7;
    std::size_t position = spec_.size();  // too few: where the next field should start
    if (count > allowed) position = allowed < max_fields ? tokens[allowed].begin : first_extra;
    if (count == 6) {
      position = tokens[5].begin;
      fail("", position, fmt::format("expected {}, got 6: the 6th field \"{}\" names no year ({}-{}); a seconds "
                                     "field comes first only with the seconds option",
                                     expected, quote_for_message(tokens[5].text), CronFields::first_year,
                                     CronFields::last_year));
    }
    fail("", position, fmt::format("expected {}, got {}", expected, count));
  }

  // A year field as a 6th field must name a year (four digits in a row, as
  // the daemon's jobs files require): `*`, `*/2` or `1-5` there is more
  // likely a seconds-first spec read without seconds.
  static bool names_a_year(std::string_view text) {
    std::size_t run = 0;
    for (const char c : text) {
      run = is_digit(c) ? run + 1 : 0;
      if (run == 4) return true;
    }
    return false;
  }

  void parse_field(Field field, const Token& token, CronFields& fields) {
    std::size_t term_begin = 0;
    while (true) {
      std::size_t term_end = token.text.find(',', term_begin);
      if (term_end == std::string_view::npos) term_end = token.text.size();
      const Token term{token.begin + term_begin, token.text.substr(term_begin, term_end - term_begin)};
      if (term.text.empty()) fail(info_of(field).name, term.begin, "empty term in list");
      parse_term(field, term, fields);
      if (term_end == token.text.size()) break;
      term_begin = term_end + 1;
    }
  }

  void parse_term(Field field, const Token& term, CronFields& fields) {
    if (field == Field::day_of_month && parse_quartz_day_of_month(term, fields)) return;
    if (field == Field::day_of_week && parse_quartz_day_of_week(term, fields)) return;
    const FieldInfo info = info_of(field);
    pos_ = term.begin;
    term_end_ = term.begin + term.text.size();
    unsigned low = info.min;
    unsigned high = info.max;
    bool star = false;
    const std::size_t range_pos = pos_;
    // Day-of-week: 7 is Sunday as a single value or a range end only; `*`
    // and `n/step` run to 6 (Vixie cron, cronie): `1/2` is Mon, Wed, Fri.
    const unsigned open_end = field == Field::day_of_week ? 6 : info.max;
    if (peek() == '*' || peek() == '?') {
      const bool question = peek() == '?';
      if (question && field != Field::day_of_month && field != Field::day_of_week) {
        fail(info.name, pos_, "'?' is only allowed in day-of-month and day-of-week");
      }
      star = true;
      high = open_end;
      ++pos_;
      if (question && peek() == '/') fail(info.name, pos_, "'?' takes no step (it means \"no specific value\")");
    } else {
      low = read_value(field);
      high = low;
      if (peek() == '-') {
        ++pos_;
        high = read_value(field);
        if (low > high) {
          // 7 is Sunday as 0 is: the wrapped week ends at Saturday.
          const unsigned last = field == Field::day_of_week ? 6U : info.max;
          fail(info.name, range_pos,
               fmt::format("beginning of range {} beyond end {}: a range does not wrap around; write {}-{},{}-{}", low,
                           high, low, last, info.min, high));
        }
      } else if (peek() == '/') {
        if (field == Field::day_of_week && low == 7) {
          fail(info.name, range_pos, "7 (Sunday) cannot start a step: write 0/step");
        }
        high = open_end;  // n/step runs from n to the field's maximum
      }
    }
    unsigned step = 1;
    if (peek() == '/') {
      ++pos_;
      const std::size_t step_pos = pos_;
      step = read_number(field);
      if (step == 0) fail(info.name, step_pos, "step 0: a step must be at least 1");
      // A step as large as the range or larger fires at the start only
      // (`*/60` in minutes is minute 0), as Vixie cron does.
    }
    if (pos_ != term_end_) fail_unexpected(field);
    set_range(field, low, high, step, fields);
    if (star && field == Field::day_of_month) fields.day_of_month_star = true;
    if (star && field == Field::day_of_week) fields.day_of_week_star = true;
  }

  static void set_range(Field field, unsigned low, unsigned high, unsigned step, CronFields& fields) {
    for (unsigned v = low; v <= high; v += step) {
      switch (field) {
        case Field::second: fields.seconds |= std::uint64_t{1} << v; break;
        case Field::minute: fields.minutes |= std::uint64_t{1} << v; break;
        case Field::hour: fields.hours |= 1u << v; break;
        case Field::day_of_month: fields.days_of_month |= 1u << v; break;
        case Field::month: fields.months = static_cast<std::uint16_t>(fields.months | 1u << v); break;
        case Field::day_of_week: fields.days_of_week = static_cast<std::uint8_t>(fields.days_of_week | 1u << (v % 7)); break;
        case Field::year: {
          const unsigned bit = v - static_cast<unsigned>(CronFields::first_year);
          fields.years[bit / 64] |= std::uint64_t{1} << (bit % 64);
          break;
        }
      }
    }
  }

  // L, L-n, LW, nW. Returns false when the term is none of them.
  bool parse_quartz_day_of_month(const Token& term, CronFields& fields) {
    const std::string_view text = term.text;
    const std::string_view name = info_of(Field::day_of_month).name;
    if (lower(text[0]) == 'l') {
      if (text.size() == 1) {
        fields.last_day = true;
      } else if (text.size() == 2 && lower(text[1]) == 'w') {
        fields.last_weekday = true;
      } else if (text[1] == '-') {
        pos_ = term.begin + 2;
        term_end_ = term.begin + text.size();
        const std::size_t n_pos = pos_;
        const unsigned n = read_number(Field::day_of_month);
        if (n < 1 || n > 30) fail(name, n_pos, fmt::format("L-{}: the offset must be 1 to 30", n));
        if (pos_ != term_end_) fail_unexpected(Field::day_of_month);
        fields.days_before_last |= 1u << n;
      } else {
        fail(name, term.begin + 1, "expected L, LW or L-n");
      }
      return true;
    }
    if (lower(text.back()) != 'w' || !is_digit(text[0])) return false;
    pos_ = term.begin;
    term_end_ = term.begin + text.size() - 1;
    const unsigned n = read_value(Field::day_of_month);
    if (pos_ != term_end_) fail_unexpected(Field::day_of_month);
    fields.nearest_weekday |= 1u << n;
    return true;
  }

  // N#M and NL (N a number 0-7 or a name). Returns false for anything else.
  bool parse_quartz_day_of_week(const Token& term, CronFields& fields) {
    const std::string_view text = term.text;
    const std::string_view name = info_of(Field::day_of_week).name;
    const std::size_t hash = text.find('#');
    const bool last = hash == std::string_view::npos && text.size() > 1 && lower(text.back()) == 'l';
    if (hash == std::string_view::npos && !last) {
      if (text.size() == 1 && lower(text[0]) == 'l') fail(name, term.begin, "L in day-of-week needs a day, e.g. 5L or FRIL");
      return false;
    }
    pos_ = term.begin;
    term_end_ = term.begin + (last ? text.size() - 1 : hash);
    if (pos_ == term_end_) fail(name, pos_, "expected a day before '#'");
    const unsigned day = read_value(Field::day_of_week) % 7;
    if (pos_ != term_end_) fail_unexpected(Field::day_of_week);
    if (last) {
      fields.last_of_weekday = static_cast<std::uint8_t>(fields.last_of_weekday | 1u << day);
      return true;
    }
    pos_ = term.begin + hash + 1;
    term_end_ = term.begin + text.size();
    const std::size_t nth_pos = pos_;
    const unsigned nth = read_number(Field::day_of_week);
    if (nth < 1 || nth > 5) fail(name, nth_pos, fmt::format("#{}: the occurrence must be 1 to 5", nth));
    if (pos_ != term_end_) fail_unexpected(Field::day_of_week);
    fields.nth_of_weekday[day] = static_cast<std::uint8_t>(fields.nth_of_weekday[day] | 1u << nth);
    return true;
  }

  char peek() const { return pos_ < term_end_ ? spec_[pos_] : '\0'; }

  unsigned read_number(Field field) {
    const std::size_t start = pos_;
    if (!is_digit(peek())) {
      if (pos_ == term_end_) fail(info_of(field).name, pos_, "expected a number");
      fail_unexpected(field);
    }
    unsigned value = 0;
    while (is_digit(peek())) {
      value = value * 10 + static_cast<unsigned>(peek() - '0');
      if (value > max_number) fail(info_of(field).name, start, "number too large");
      ++pos_;
    }
    return value;
  }

  // A number or, in month and day-of-week, a three-letter name; range-checked.
  unsigned read_value(Field field) {
    const FieldInfo info = info_of(field);
    const std::size_t start = pos_;
    if (is_letter(peek()) && (field == Field::month || field == Field::day_of_week)) {
      while (is_letter(peek())) ++pos_;
      const std::string_view word = spec_.substr(start, pos_ - start);
      if (field == Field::month) {
        for (unsigned i = 0; i < month_names.size(); ++i) {
          if (equals_ignoring_case(word, month_names[i])) return i + 1;
        }
      } else {
        for (unsigned i = 0; i < weekday_names.size(); ++i) {
          if (equals_ignoring_case(word, weekday_names[i])) return i;
        }
      }
      fail(info.name, start, fmt::format("unknown name \"{}\"", quote_for_message(word)));
    }
    const unsigned value = read_number(field);
    if (value < info.min) fail(info.name, start, fmt::format("{} below minimum {}", value, info.min));
    if (value > info.max) fail(info.name, start, fmt::format("{} above maximum {}", value, info.max));
    return value;
  }

  [[noreturn]] void fail_unexpected(Field field) const {
    const std::string_view name = info_of(field).name;
    const char c = spec_[pos_];
    switch (lower(c)) {
      case 'l':
        if (field != Field::day_of_month && field != Field::day_of_week) {
          fail(name, pos_, "'L' is only allowed in day-of-month and day-of-week");
        }
        break;
      case 'w':
        if (field != Field::day_of_month) fail(name, pos_, "'W' is only allowed in day-of-month");
        break;
      case '#':
        if (field != Field::day_of_week) fail(name, pos_, "'#' is only allowed in day-of-week");
        break;
      default:
        break;
    }
    if (field == Field::day_of_month && (lower(c) == 'l' || lower(c) == 'w')) {
      fail(name, pos_, fmt::format("unexpected character {}: day-of-month takes L, L-n, LW or nW as whole terms",
                                   describe_char(c)));
    }
    if (is_letter(c) && field != Field::month && field != Field::day_of_week) {
      fail(name, pos_, fmt::format("unexpected character {}: names are only allowed in month and day-of-week", describe_char(c)));
    }
    fail(name, pos_, fmt::format("unexpected character {}", describe_char(c)));
  }

  std::string_view spec_;
  const ParseOptions& options_;
  std::string_view zone_field_;               // "TZ" or "CRON_TZ" once a prefix was read
  std::optional<std::size_t> zone_position_;  // where that prefix starts
  std::size_t pos_ = 0;       // cursor inside the current term
  std::size_t term_end_ = 0;  // end of the current term
};

}  // namespace

SchedulePtr parse_schedule(std::string_view spec, const ParseOptions& options) {
  return SpecParser(spec, options).parse();
}

std::string_view to_string(DstGap gap) noexcept { return gap == DstGap::shift ? "shift" : "skip"; }

std::string_view to_string(DstOverlap overlap) noexcept {
  switch (overlap) {
    case DstOverlap::first: return "first";
    case DstOverlap::last: return "last";
    case DstOverlap::both: return "both";
  }
  return "unknown";
}

std::optional<DstGap> dst_gap_from_string(std::string_view text) noexcept {
  if (text == "shift") return DstGap::shift;
  if (text == "skip") return DstGap::skip;
  return std::nullopt;
}

std::optional<DstOverlap> dst_overlap_from_string(std::string_view text) noexcept {
  if (text == "first") return DstOverlap::first;
  if (text == "last") return DstOverlap::last;
  if (text == "both") return DstOverlap::both;
  return std::nullopt;
}

}  // namespace fleetcron
