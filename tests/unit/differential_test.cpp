// Differential test: next() against a brute-force oracle that walks absolute
// minutes (or seconds), reads each instant's offset from the date library
// directly, and applies the DST rules as written in docs/time-engine.md.
// The oracle shares no code with the engine: the random spec generator
// records what each term means, and the oracle matches on those sets.
#include <date/tz.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace fleetcron {
namespace {

using namespace std::chrono;

struct OracleSpec {
  std::string text;
  bool has_seconds = false;
  std::array<bool, 60> second{};
  std::array<bool, 60> minute{};
  std::array<bool, 24> hour{};
  std::array<bool, 32> day_of_month{};
  std::array<bool, 13> month{};
  std::array<bool, 7> day_of_week{};
  bool has_year = false;
  std::vector<bool> year = std::vector<bool>(2100, true);  // indexed by the year itself
  bool day_of_month_star = false;
  bool day_of_week_star = false;
  bool last_day = false;
  std::vector<int> days_before_last;
  bool last_weekday = false;
  std::vector<int> nearest_weekday;
  std::vector<std::pair<int, int>> nth_weekday;  // (weekday, occurrence)
  std::vector<int> last_of_weekday;

  bool hour_star = false;  // the hour field starts with '*': periodic (Vixie cron's HR_STAR)

  bool every_hour() const {
    if (hour_star) return true;
    for (bool h : hour) {
      if (!h) return false;
    }
    return true;
  }
};

class SpecGenerator {
 public:
  explicit SpecGenerator(std::uint64_t seed) : rng_(seed) {}

  OracleSpec make() {
    OracleSpec spec;
    spec.has_seconds = chance(0.2);
    std::vector<std::string> parts;
    if (spec.has_seconds) {
      parts.push_back(numeric_field(spec.second, 0, 59, 0.3, {}, nullptr));
    } else {
      spec.second[0] = true;
    }
    parts.push_back(numeric_field(spec.minute, 0, 59, 0.3, {}, nullptr));
    parts.push_back(hour_field(spec));
    parts.push_back(day_of_month_field(spec));
    parts.push_back(numeric_field(spec.month, 1, 12, 0.8, month_names(), nullptr));
    parts.push_back(day_of_week_field(spec));
    if (chance(0.15)) parts.push_back(year_field(spec));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i) spec.text += ' ';
      spec.text += parts[i];
    }
    return spec;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  static const std::vector<std::string>& month_names() {
    static const std::vector<std::string> names{"", "jan", "FEB", "Mar", "apr", "may", "jun",
                                                "jul", "aug", "sep", "oct", "nov", "dec"};
    return names;
  }
  static const std::vector<std::string>& weekday_names() {
    static const std::vector<std::string> names{"sun", "MON", "tue", "Wed", "thu", "fri", "sat"};
    return names;
  }

  std::string value_text(int v, const std::vector<std::string>& names) {
    if (!names.empty() && v < int(names.size()) && !names[std::size_t(v)].empty() && chance(0.3)) {
      return names[std::size_t(v)];
    }
    return std::to_string(v);
  }

  // A comma list of 1–3 terms; `star_probability` of a lone `*`.
  template <std::size_t N>
  std::string numeric_field(std::array<bool, N>& set, int lo, int hi, double star_probability,
                            const std::vector<std::string>& names, bool* star, int open_hi = -1) {
    if (open_hi < 0) open_hi = hi;
    if (chance(star_probability)) {
      for (int v = lo; v <= open_hi; ++v) set[std::size_t(v % int(N))] = true;
      if (star) *star = true;
      return "*";
    }
    const int terms = uniform(1, 3);
    std::string text;
    for (int t = 0; t < terms; ++t) {
      if (t) text += ",";
      text += numeric_term(set, lo, hi, names, star, open_hi);
    }
    return text;
  }

  template <std::size_t N>
  // `open_hi`: where `*` and `n/step` end (day-of-week: 6; 7 is Sunday
  // only as a single value or a range end).
  std::string numeric_term(std::array<bool, N>& set, int lo, int hi, const std::vector<std::string>& names,
                           bool* star, int open_hi) {
    auto mark = [&](int a, int b, int step) {
      for (int v = a; v <= b; v += step) set[std::size_t(v % int(N))] = true;
    };
    const int a = uniform(lo, hi);
    const int b = uniform(a, hi);
    const int step = uniform(1, std::max(1, (hi - lo) / 3));
    switch (uniform(0, 4)) {
      case 0: mark(a, a, 1); return value_text(a, names);
      case 1: mark(a, b, 1); return value_text(a, names) + "-" + value_text(b, names);
      case 2: mark(a, b, step); return value_text(a, names) + "-" + value_text(b, names) + "/" + std::to_string(step);
      case 3: {
        const int start = std::min(a, open_hi);
        mark(start, open_hi, step);
        return value_text(start, names) + "/" + std::to_string(step);
      }
      default:
        mark(lo, open_hi, step);
        if (star) *star = true;
        return "*/" + std::to_string(step);
    }
  }

  // Restricted hours favour 0–4, where the test zones change offsets.
  std::string hour_field(OracleSpec& spec) {
    if (chance(0.4)) return numeric_field(spec.hour, 0, 23, 1.0, {}, nullptr);
    if (chance(0.3)) {
      std::string text = numeric_field(spec.hour, 0, 23, 0.0, {}, nullptr);
      spec.hour_star = text.starts_with('*');
      return text;
    }
    std::string text;
    const int terms = uniform(1, 3);
    for (int t = 0; t < terms; ++t) {
      const int h = uniform(0, 4);
      spec.hour[std::size_t(h)] = true;
      if (t) text += ',';
      text += std::to_string(h);
    }
    return text;
  }

  std::string day_of_month_field(OracleSpec& spec) {
    if (chance(0.55)) return numeric_field(spec.day_of_month, 1, 31, 1.0, {}, &spec.day_of_month_star);
    if (chance(0.1)) {
      for (int d = 1; d <= 31; ++d) spec.day_of_month[std::size_t(d)] = true;
      spec.day_of_month_star = true;
      return "?";
    }
    if (chance(0.7)) return numeric_field(spec.day_of_month, 1, 31, 0.0, {}, &spec.day_of_month_star);
    switch (uniform(0, 3)) {
      case 0: spec.last_day = true; return "L";
      case 1: spec.last_weekday = true; return "LW";
      case 2: {
        const int n = uniform(1, 30);
        spec.days_before_last.push_back(n);
        return "L-" + std::to_string(n);
      }
      default: {
        const int n = uniform(1, 31);
        spec.nearest_weekday.push_back(n);
        return std::to_string(n) + "W";
      }
    }
  }

  // Years around the test windows (2020–2035); `*` only with seconds, where
  // a 7th field is a year whatever it holds.
  std::string year_field(OracleSpec& spec) {
    spec.has_year = true;
    std::fill(spec.year.begin(), spec.year.end(), false);
    if (spec.has_seconds && chance(0.2)) {
      std::fill(spec.year.begin(), spec.year.end(), true);
      return "*";
    }
    auto mark = [&](int a, int b, int step) {
      for (int v = a; v <= b; v += step) spec.year[std::size_t(v)] = true;
    };
    std::string text;
    const int terms = uniform(1, 3);
    for (int t = 0; t < terms; ++t) {
      if (t) text += ',';
      const int a = uniform(2019, 2037);
      const int b = uniform(a, 2040);
      const int step = uniform(1, 4);
      switch (uniform(0, 4)) {
        case 0: mark(a, a, 1); text += std::to_string(a); break;
        case 1: mark(a, b, 1); text += fmt::format("{}-{}", a, b); break;
        case 2: mark(a, b, step); text += fmt::format("{}-{}/{}", a, b, step); break;
        case 3: mark(a, 2099, step); text += fmt::format("{}/{}", a, step); break;
        default: mark(1970, 2099, step); text += fmt::format("1970-2099/{}", step); break;
      }
    }
    return text;
  }

  std::string day_of_week_field(OracleSpec& spec) {
    if (chance(0.55)) return numeric_field(spec.day_of_week, 0, 6, 1.0, {}, &spec.day_of_week_star, 6);
    if (chance(0.1)) {
      spec.day_of_week.fill(true);
      spec.day_of_week_star = true;
      return "?";
    }
    if (chance(0.7)) return numeric_field(spec.day_of_week, 0, 7, 0.0, weekday_names(), &spec.day_of_week_star, 6);
    const int w = uniform(0, 6);
    if (chance(0.5)) {
      spec.last_of_weekday.push_back(w);
      return value_text(w, weekday_names()) + "L";
    }
    const int nth = uniform(1, 5);
    spec.nth_weekday.emplace_back(w, nth);
    return value_text(w, weekday_names()) + "#" + std::to_string(nth);
  }

  std::mt19937_64 rng_;
};

// ---- the oracle -----------------------------------------------------

bool is_weekday(weekday w) { return w != Saturday && w != Sunday; }

bool day_matches(const OracleSpec& spec, year_month_day ymd) {
  const int d = int(unsigned(ymd.day()));
  const int last = int(unsigned(year_month_day_last{ymd.year() / ymd.month() / std::chrono::last}.day()));
  auto weekday_of_day = [&](int day_number) {
    return weekday{sys_days{ymd.year() / ymd.month() / std::chrono::day{unsigned(day_number)}}};
  };
  bool by_month_day = spec.day_of_month[std::size_t(d)];
  by_month_day = by_month_day || (spec.last_day && d == last);
  for (int n : spec.days_before_last) by_month_day = by_month_day || d == last - n;
  if (spec.last_weekday) {
    int candidate = last;
    while (!is_weekday(weekday_of_day(candidate))) --candidate;
    by_month_day = by_month_day || d == candidate;
  }
  for (int n : spec.nearest_weekday) {
    if (n > last) continue;
    // The closest Monday–Friday inside the month (distance 0, 1, 2, …).
    for (int distance = 0; distance < 3; ++distance) {
      int found = 0;
      for (int candidate : {n - distance, n + distance}) {
        if (candidate >= 1 && candidate <= last && is_weekday(weekday_of_day(candidate))) found = candidate;
      }
      if (found != 0) {
        by_month_day = by_month_day || d == found;
        break;
      }
    }
  }
  const weekday w = weekday_of_day(d);
  bool by_weekday = spec.day_of_week[w.c_encoding()];
  for (auto [day, nth] : spec.nth_weekday) by_weekday = by_weekday || (int(w.c_encoding()) == day && (d - 1) / 7 + 1 == nth);
  for (int day : spec.last_of_weekday) by_weekday = by_weekday || (int(w.c_encoding()) == day && d + 7 > last);
  if (spec.day_of_month_star || spec.day_of_week_star) return by_month_day && by_weekday;
  return by_month_day || by_weekday;
}

bool oracle_matches(const OracleSpec& spec, date::local_seconds local) {
  const auto day = floor<days>(local);
  const year_month_day ymd{sys_days{day.time_since_epoch()}};
  const hh_mm_ss<seconds> tod{local - day};
  return spec.year[std::size_t(int(ymd.year()))] && spec.month[unsigned(ymd.month())] && day_matches(spec, ymd) && spec.hour[std::size_t(tod.hours().count())] &&
         spec.minute[std::size_t(tod.minutes().count())] && spec.second[std::size_t(tod.seconds().count())];
}

std::vector<Instant> oracle_fires(const OracleSpec& spec, const date::time_zone* zone, DstPolicy policy,
                                  sys_seconds from, sys_seconds to) {
  const seconds step = spec.has_seconds ? seconds{1} : seconds{60};
  const bool periodic = spec.every_hour();
  std::vector<Instant> out;
  sys_seconds t = floor<minutes>(from) + (spec.has_seconds ? seconds{0} : minutes{0});
  while (t <= from) t += step;
  auto info = zone->get_info(t);
  for (; t <= to; t += step) {
    if (t >= info.end) info = zone->get_info(t);
    const date::local_seconds local{t.time_since_epoch() + info.offset};
    bool fire = false;
    if (oracle_matches(spec, local)) {
      const auto local_info = zone->get_info(local);
      if (periodic || local_info.result == date::local_info::unique) {
        fire = true;
      } else {
        const sys_seconds earlier{local.time_since_epoch() - local_info.first.offset};
        const sys_seconds later{local.time_since_epoch() - local_info.second.offset};
        fire = policy.overlap == DstOverlap::both || (policy.overlap == DstOverlap::first && t == earlier) ||
               (policy.overlap == DstOverlap::last && t == later);
      }
    }
    if (!fire && !periodic && policy.gap == DstGap::shift && t == info.begin) {
      const auto before = zone->get_info(t - seconds{1}).offset;
      for (auto skipped = date::local_seconds{t.time_since_epoch() + before}; skipped < local && !fire; skipped += step) {
        fire = oracle_matches(spec, skipped);
      }
    }
    if (fire) out.push_back(Instant{t});
  }
  return out;
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtoull(value, nullptr, 10) : fallback;
}

// A start near one of the zone's transitions in `year`, or anywhere.
// With a year field, often a start just before a new year.
sys_seconds pick_start(SpecGenerator& gen, const date::time_zone* zone, bool has_year) {
  const int y = gen.uniform(2020, 2035);
  const sys_seconds year_start{sys_days{year{y} / January / 1}};
  if (has_year && gen.chance(0.5)) return year_start - seconds{gen.uniform(1, 40 * 3600)};
  if (gen.chance(0.6)) {
    std::vector<sys_seconds> transitions;
    for (auto info = zone->get_info(year_start); info.end < year_start + days{366};
         info = zone->get_info(info.end)) {
      transitions.push_back(info.end);
    }
    if (!transitions.empty()) {
      const auto t = transitions[std::size_t(gen.uniform(0, int(transitions.size()) - 1))];
      return t + seconds{gen.uniform(-36 * 3600, 12 * 3600)};
    }
  }
  return year_start + seconds{gen.uniform(0, 365 * 86'400 - 1)};
}

TEST(Differential, NextMatchesTheBruteForceOracle) {
  const std::uint64_t seed = env_or("FLEETCRON_DIFFERENTIAL_SEED", 20261129);
  const std::uint64_t cases = env_or("FLEETCRON_DIFFERENTIAL_CASES", 3000);
  SpecGenerator gen(seed);
  const std::array<const char*, 5> zones{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
                                         "Asia/Kolkata"};
  const std::array<DstPolicy, 6> policies{
      DstPolicy{DstGap::shift, DstOverlap::first}, DstPolicy{DstGap::shift, DstOverlap::last},
      DstPolicy{DstGap::shift, DstOverlap::both},  DstPolicy{DstGap::skip, DstOverlap::first},
      DstPolicy{DstGap::skip, DstOverlap::last},   DstPolicy{DstGap::skip, DstOverlap::both}};
  std::uint64_t fires_compared = 0;
  for (std::uint64_t i = 0; i < cases; ++i) {
    const OracleSpec spec = gen.make();
    const char* zone_name = zones[std::size_t(gen.uniform(0, int(zones.size()) - 1))];
    const DstPolicy policy = policies[std::size_t(gen.uniform(0, int(policies.size()) - 1))];
    const date::time_zone* zone = date::locate_zone(zone_name);
    const sys_seconds from = pick_start(gen, zone, spec.has_year);
    const sys_seconds to = from + (spec.has_seconds ? hours{4} : hours{48});

    ParseOptions options = test::in_zone(zone_name, policy);
    // A 6-field spec with a year last needs SecondsField::none (optional reads seconds first).
    options.seconds = spec.has_year && !spec.has_seconds ? SecondsField::none : SecondsField::optional;
    const SchedulePtr schedule = parse_schedule(spec.text, options);
    const auto expected = oracle_fires(spec, zone, policy, from, to);
    const auto actual = between(*schedule, Instant{from}, Instant{to});
    fires_compared += expected.size();
    if (expected != actual) {
      std::string detail;
      for (std::size_t k = 0; k < std::max(expected.size(), actual.size()) && k < 8; ++k) {
        detail += fmt::format("  [{}] oracle {:<28} next() {}\n", k,
                              k < expected.size() ? format_rfc3339(expected[k], schedule->zone()) : "-",
                              k < actual.size() ? format_rfc3339(actual[k], schedule->zone()) : "-");
      }
      FAIL() << "case " << i << " (seed " << seed << "): spec \"" << spec.text << "\" in " << zone_name
             << " gap=" << to_string(policy.gap) << " overlap=" << to_string(policy.overlap) << " window ("
             << format_rfc3339(Instant{from}) << ", " << format_rfc3339(Instant{to}) << "]: oracle "
             << expected.size() << " fires, next() " << actual.size() << "\n"
             << detail;
    }
  }
  std::cout << "differential: " << cases << " cases, " << fires_compared << " fires compared (seed " << seed << ")\n";
  EXPECT_GT(fires_compared, cases);  // the generator must produce specs that fire
}

}  // namespace
}  // namespace fleetcron
