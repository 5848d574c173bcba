#include "core/time/zone_rules.h"

#include <date/tz.h>

#include <algorithm>

#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "core/support/assert.h"

namespace fleetcron::detail {
namespace {

using std::chrono::sys_days;

// The table covers every instant fleetcron computes with (1970–2200) with a
// margin on both sides, so the 5-year search horizon never leaves it.
constexpr int table_first_year = 1800;
constexpr int table_last_year = 2210;
constexpr std::size_t table_max_periods = 20'000;
constexpr const char* zoneinfo_dir = "/usr/share/zoneinfo/";

std::int64_t days_to_seconds(sys_days day) { return std::int64_t{day.time_since_epoch().count()} * 86'400; }

// ---- POSIX TZ strings (RFC 8536 §3.3) ---------------------------------

class PosixReader {
 public:
  explicit PosixReader(std::string_view text) : text_(text) {}

  bool at_end() const { return pos_ >= text_.size(); }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }

  // An abbreviation: <...> or three or more letters.
  bool name() {
    if (accept('<')) {
      while (!at_end() && !peek('>')) ++pos_;
      return accept('>');
    }
    std::size_t start = pos_;
    while (!at_end() && std::isalpha(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
    return pos_ - start >= 3;
  }

  std::optional<int> number(int max) {
    if (at_end() || std::isdigit(static_cast<unsigned char>(text_[pos_])) == 0) return std::nullopt;
    int value = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
      value = value * 10 + (text_[pos_] - '0');
      if (value > max) return std::nullopt;
      ++pos_;
    }
    return value;
  }

  // [+-]hh[:mm[:ss]] in seconds; hours up to 167 (RFC 8536 extension).
  std::optional<std::int32_t> clock(int max_hours) {
    int sign = 1;
    if (accept('-')) {
      sign = -1;
    } else {
      accept('+');
    }
    auto hours = number(max_hours);
    if (!hours) return std::nullopt;
    int total = *hours * 3600;
    if (accept(':')) {
      auto minutes = number(59);
      if (!minutes) return std::nullopt;
      total += *minutes * 60;
      if (accept(':')) {
        auto seconds = number(59);
        if (!seconds) return std::nullopt;
        total += *seconds;
      }
    }
    return sign * total;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct PosixDate {
  char kind = 'M';  // 'J' (1..365, no Feb 29), 'N' (0..365), 'M' (month.week.day)
  int a = 0, b = 0, c = 0;
  std::int32_t time_s = 2 * 3600;
};

std::optional<PosixDate> read_posix_date(PosixReader& in) {
  PosixDate date;
  if (in.accept('M')) {
    auto month = in.number(12);
    if (!month || *month < 1 || !in.accept('.')) return std::nullopt;
    auto week = in.number(5);
    if (!week || *week < 1 || !in.accept('.')) return std::nullopt;
    auto weekday = in.number(6);
    if (!weekday) return std::nullopt;
    date = PosixDate{'M', *month, *week, *weekday};
  } else if (in.accept('J')) {
    auto day = in.number(365);
    if (!day || *day < 1) return std::nullopt;
    date = PosixDate{'J', *day};
  } else {
    auto day = in.number(365);
    if (!day) return std::nullopt;
    date = PosixDate{'N', *day};
  }
  if (in.accept('/')) {
    auto time = in.clock(167);
    if (!time) return std::nullopt;
    date.time_s = *time;
  }
  return date;
}

sys_days posix_day(const PosixDate& date, int year) {
  using namespace std::chrono;
  const std::chrono::year y{year};
  if (date.kind == 'J') {
    // Day 1..365 never counts February 29.
    sys_days day = sys_days{y / January / 1} + days{date.a - 1};
    if (y.is_leap() && date.a >= 60) day += days{1};
    return day;
  }
  if (date.kind == 'N') return sys_days{y / January / 1} + days{date.a};
  const auto month = std::chrono::month{static_cast<unsigned>(date.a)};
  const auto target = weekday{static_cast<unsigned>(date.c)};
  if (date.b == 5) return sys_days{y / month / target[last]};
  return sys_days{y / month / target[static_cast<unsigned>(date.b)]};
}

}  // namespace

std::vector<RuleTransition> posix_rule_transitions(std::string_view posix_tz, int first_year, int last_year) {
  PosixReader in(posix_tz);
  if (!in.name()) return {};
  auto std_clock = in.clock(24);
  if (!std_clock) return {};
  if (in.at_end()) return {};  // no daylight saving
  if (!in.name()) return {};
  std::int32_t std_offset_s = -*std_clock;
  std::int32_t dst_offset_s = std_offset_s + 3600;
  if (!in.peek(',') && !in.at_end()) {
    auto dst_clock = in.clock(24);
    if (!dst_clock) return {};
    dst_offset_s = -*dst_clock;
  }
  PosixDate start{'M', 3, 2, 0}, end{'M', 11, 1, 0};  // POSIX default rule (US)
  if (in.accept(',')) {
    auto s = read_posix_date(in);
    if (!s || !in.accept(',')) return {};
    auto e = read_posix_date(in);
    if (!e) return {};
    start = *s;
    end = *e;
  }
  if (!in.at_end()) return {};

  std::vector<RuleTransition> out;
  for (int year = first_year; year <= last_year; ++year) {
    // The start time is local standard time, the end time local daylight time.
    std::int64_t start_s = days_to_seconds(posix_day(start, year)) + start.time_s - std_offset_s;
    std::int64_t end_s = days_to_seconds(posix_day(end, year)) + end.time_s - dst_offset_s;
    out.push_back({start_s, dst_offset_s});
    out.push_back({end_s, std_offset_s});
  }
  // Stable: on equal instants (permanent DST, where one year's end meets
  // the next year's start) rule order decides, and the later one wins.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.at_s < b.at_s; });
  std::vector<RuleTransition> unique;
  for (const auto& t : out) {
    if (!unique.empty() && unique.back().at_s == t.at_s) {
      unique.back() = t;
    } else {
      unique.push_back(t);
    }
  }
  return unique;
}

namespace {

// The last line of a TZif file (v2+) is its POSIX TZ footer.
std::string read_footer(std::string_view name) {
  std::ifstream file(std::string(zoneinfo_dir) + std::string(name), std::ios::binary);
  if (!file) return {};
  std::ostringstream content;
  content << file.rdbuf();
  std::string data = content.str();
  if (data.size() < 2 || data.back() != '\n') return {};
  std::size_t start = data.rfind('\n', data.size() - 2);
  if (start == std::string::npos) return {};
  return data.substr(start + 1, data.size() - start - 2);
}

std::unique_ptr<ZoneRules> build_rules(std::string_view name) {
  const date::time_zone* zone = nullptr;
  try {
    zone = date::locate_zone(name);
  } catch (const std::runtime_error&) {
    return nullptr;
  }
  using namespace std::chrono;
  const sys_seconds table_end{sys_days{year{table_last_year} / January / 1}};
  sys_seconds cursor{sys_days{year{table_first_year} / January / 1}};
  auto info = zone->get_info(cursor);
  std::vector<std::int64_t> begins{period_unbounded_begin};
  std::vector<std::int32_t> offsets{static_cast<std::int32_t>(info.offset.count())};
  while (info.end < table_end && begins.size() < table_max_periods) {
    cursor = info.end;
    info = zone->get_info(cursor);
    auto offset = static_cast<std::int32_t>(info.offset.count());
    if (offset == offsets.back()) continue;  // only the abbreviation changed
    begins.push_back(cursor.time_since_epoch().count());
    offsets.push_back(offset);
  }
  // date's OS-tzdb reader ignores the footer, so a zone with daylight saving
  // would keep its last offset forever after 2037. Continue with the rule.
  int first_rule_year = table_first_year;
  if (begins.size() > 1) {
    first_rule_year = int(year_month_day{floor<days>(sys_seconds{seconds{begins.back()}})}.year());
  }
  for (const auto& t : posix_rule_transitions(read_footer(name), first_rule_year, table_last_year)) {
    if (t.at_s <= begins.back() || t.offset_s == offsets.back()) continue;
    begins.push_back(t.at_s);
    offsets.push_back(t.offset_s);
  }
  return std::make_unique<ZoneRules>(std::string(name), std::move(begins), std::move(offsets));
}

bool is_utc_name(std::string_view name) { return name == "UTC" || name == "Etc/UTC"; }

}  // namespace

ZoneRules::ZoneRules(std::string name, std::vector<std::int64_t> begins_s, std::vector<std::int32_t> offsets_s)
    : name_(std::move(name)), begins_s_(std::move(begins_s)), offsets_s_(std::move(offsets_s)) {
  if (begins_s_.empty() || begins_s_.size() != offsets_s_.size() || begins_s_[0] != period_unbounded_begin) {
    throw std::logic_error("ZoneRules: malformed period table");
  }
}

const ZoneRules& ZoneRules::utc() noexcept {
  static const ZoneRules rules("UTC", {period_unbounded_begin}, {0});
  return rules;
}

const ZoneRules* ZoneRules::find(std::string_view name) {
  if (is_utc_name(name)) return &utc();
  // Interned for the life of the process (deliberately never destroyed, so
  // a schedule used during static destruction still has its zone).
  static std::mutex mutex;
  static auto* interned = new std::map<std::string, std::unique_ptr<ZoneRules>, std::less<>>();
  std::lock_guard lock(mutex);
  if (auto it = interned->find(name); it != interned->end()) return it->second.get();
  auto rules = build_rules(name);
  if (!rules) return nullptr;
  return interned->emplace(std::string(name), std::move(rules)).first->second.get();
}

ZonePeriod ZoneRules::make_period(std::size_t index) const noexcept {
  FLEETCRON_ASSERT(index < begins_s_.size());
  const std::size_t last = begins_s_.size() - 1;
  return ZonePeriod{
      begins_s_[index],
      index < last ? begins_s_[index + 1] : period_unbounded_end,
      offsets_s_[index],
      index > 0 ? offsets_s_[index - 1] : offsets_s_[index],
      index < last ? offsets_s_[index + 1] : offsets_s_[index],
      static_cast<std::uint32_t>(index),
  };
}

ZonePeriod ZoneRules::period_at(std::int64_t at_s) const noexcept {
  auto it = std::upper_bound(begins_s_.begin(), begins_s_.end(), at_s);
  FLEETCRON_ASSERT(it != begins_s_.begin());
  return make_period(static_cast<std::size_t>(it - begins_s_.begin()) - 1);
}

ZonePeriod ZoneRules::period_after(const ZonePeriod& period) const noexcept {
  FLEETCRON_ASSERT(period.index + 1 < begins_s_.size());
  return make_period(period.index + 1);
}

}  // namespace fleetcron::detail
