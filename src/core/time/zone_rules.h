// Internal: a zone's UTC offsets as a sorted table of periods.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace fleetcron::detail {

inline constexpr std::int64_t period_unbounded_begin = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t period_unbounded_end = std::numeric_limits<std::int64_t>::max();

/// A span of UTC seconds [begin, end) with one UTC offset, plus the offsets
/// of its neighbours: a larger next_offset means a gap (spring forward) at
/// `end`, a larger prev_offset an overlap (fall back) at `begin`.
struct ZonePeriod {
  std::int64_t begin_s;
  std::int64_t end_s;
  std::int32_t offset_s;
  std::int32_t prev_offset_s;
  std::int32_t next_offset_s;
  std::uint32_t index;
};

/// A zone's offsets from 1800 to 2210, built once from Howard Hinnant's date
/// library (which reads /usr/share/zoneinfo) and extended past the last
/// transition in the file with the file's POSIX TZ footer rule (date stops
/// at 2037 otherwise). Immutable after construction.
class ZoneRules {
 public:
  /// The built-in UTC rules.
  [[nodiscard]] static const ZoneRules& utc() noexcept;

  /// The interned rules for an IANA name, loaded on first use; nullptr for
  /// an unknown name. Thread-safe. The result lives until process exit.
  [[nodiscard]] static const ZoneRules* find(std::string_view name);

  ZoneRules(std::string name, std::vector<std::int64_t> begins_s, std::vector<std::int32_t> offsets_s);

  [[nodiscard]] std::string_view name() const noexcept { return name_; }
  [[nodiscard]] bool is_utc() const noexcept { return begins_s_.size() == 1 && offsets_s_[0] == 0; }
  [[nodiscard]] std::size_t period_count() const noexcept { return begins_s_.size(); }

  /// The period containing the UTC second `at_s`.
  [[nodiscard]] ZonePeriod period_at(std::int64_t at_s) const noexcept;
  /// The period after `period` (which must not be the last one).
  [[nodiscard]] ZonePeriod period_after(const ZonePeriod& period) const noexcept;

 private:
  [[nodiscard]] ZonePeriod make_period(std::size_t index) const noexcept;

  std::string name_;
  std::vector<std::int64_t> begins_s_;  // begins_s_[0] == period_unbounded_begin, strictly increasing
  std::vector<std::int32_t> offsets_s_;  // offsets_s_[i] != offsets_s_[i + 1]
};

/// One transition computed from a POSIX TZ rule.
struct RuleTransition {
  std::int64_t at_s;
  std::int32_t offset_s;
};

/// Transitions of a POSIX TZ string (the TZif footer, e.g.
/// "EST5EDT,M3.2.0,M11.1.0") during the years [first_year, last_year], sorted.
/// Empty for a string without daylight saving or that does not parse.
[[nodiscard]] std::vector<RuleTransition> posix_rule_transitions(std::string_view posix_tz, int first_year,
                                                                 int last_year);

}  // namespace fleetcron::detail
