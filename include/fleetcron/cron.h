// fleetcron — the cron spec parser.
#pragma once

#include <optional>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/parse_error.h"
#include "fleetcron/schedule.h"
#include "fleetcron/time_zone.h"

namespace fleetcron {

/// Whether a leading seconds field is accepted.
enum class SecondsField {
  none,      ///< 5 fields: minute hour day-of-month month day-of-week (6 with a year)
  optional,  ///< 5 fields, or 6 with seconds first (7 with a year)
  required,  ///< 6 fields, seconds first (7 with a year)
};

/// What a spec does with a wall time that does not exist (spring forward).
enum class DstGap {
  shift,  ///< fire once, at the first instant after the gap (Vixie cron, cronie)
  skip,   ///< no fire for that wall time
};

/// What a spec does with a wall time that occurs twice (fall back).
enum class DstOverlap {
  first,  ///< fire once, at the earlier instant
  last,   ///< fire once, at the later instant
  both,   ///< fire at both instants
};

/// Daylight-saving policy of a spec whose hour field is restricted. A spec
/// whose hour field matches every hour is periodic: it fires at every instant
/// whose wall time matches and ignores this policy (see docs/time-engine.md).
struct FLEETCRON_API DstPolicy {
  DstGap gap = DstGap::shift;
  DstOverlap overlap = DstOverlap::first;
  friend bool operator==(const DstPolicy&, const DstPolicy&) = default;
};

[[nodiscard]] FLEETCRON_API std::string_view to_string(DstGap gap) noexcept;
[[nodiscard]] FLEETCRON_API std::string_view to_string(DstOverlap overlap) noexcept;
/// "shift" / "skip", or std::nullopt.
[[nodiscard]] FLEETCRON_API std::optional<DstGap> dst_gap_from_string(std::string_view text) noexcept;
/// "first" / "last" / "both", or std::nullopt.
[[nodiscard]] FLEETCRON_API std::optional<DstOverlap> dst_overlap_from_string(std::string_view text) noexcept;

/// Where `@every D` counts from.
enum class EveryAnchor {
  process,  ///< from the instant it is asked about: robfig/cron's @every (one process)
  epoch,    ///< multiples of D since the Unix epoch: the same instants on every replica
};

/// How specs are read.
struct FLEETCRON_API ParseOptions {
  SecondsField seconds = SecondsField::none;
  /// Zone of specs without a TZ=/CRON_TZ= prefix.
  TimeZone zone = TimeZone::utc();
  DstPolicy dst{};
  /// The scheduler uses epoch for entries with a claimer or an elector,
  /// the daemon and `fleetcron next` always.
  EveryAnchor every_anchor = EveryAnchor::process;
};

/// The longest spec accepted, in bytes.
inline constexpr std::size_t max_spec_bytes = 4096;

/// Parses a cron spec:
///   [TZ=<zone> |CRON_TZ=<zone> ] (<fields> | @yearly | @annually | @monthly |
///   @weekly | @daily | @midnight | @hourly | @every <duration>)
/// Fields are `minute hour day-of-month month day-of-week`, with a leading
/// `second` as options.seconds allows, and an optional trailing `year`
/// (1970–2099): 6 fields without seconds (the 6th must hold a number, so a
/// seconds-first spec is never read as one), 7 with seconds; under
/// SecondsField::optional 6 fields are always seconds first. Each field is a comma list of terms
/// `*`, `?` (day fields only), `n`, `a-b`, each with an optional `/step`;
/// month and day-of-week also take three-letter names. Day-of-month also
/// takes `L`, `L-n`, `LW`, `nW`; day-of-week `N#M` and `NL` (Quartz).
/// Day rule (Vixie cron): if either day field has a term `*` or `?` (also
/// with a step, `*/2`) a day must match both, otherwise either. A TZ=
/// prefix does not combine with `@every`. Throws ParseError.
[[nodiscard]] FLEETCRON_API SchedulePtr parse_schedule(std::string_view spec, const ParseOptions& options = {});

}  // namespace fleetcron
