// fleetcron — the Schedule interface and programmatic schedules.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/time.h"
#include "fleetcron/time_zone.h"

namespace fleetcron {

/// A rule that yields fire instants. Implementations are immutable: next()
/// never allocates, never throws, and is safe to call from many threads.
class FLEETCRON_API Schedule {
 public:
  virtual ~Schedule() = default;

  /// The first fire instant strictly after `after`, or std::nullopt when
  /// there is none (cron specs: none within 50 calendar years, or after
  /// the last year of a year field; see docs/time-engine.md). Returns std::nullopt for `after` outside
  /// [min_supported_instant, max_supported_instant).
  [[nodiscard]] virtual std::optional<Instant> next(Instant after) const noexcept = 0;

  /// The zone instants are shown in (a cron spec's zone; UTC otherwise).
  [[nodiscard]] virtual TimeZone zone() const noexcept { return TimeZone::utc(); }

  /// The spec text this schedule was parsed from; empty when built in code.
  [[nodiscard]] virtual std::string_view spec() const noexcept { return {}; }

  /// True for a schedule that never fires on its own (manual()).
  [[nodiscard]] virtual bool is_manual() const noexcept { return false; }

  /// True when the instants depend on when the process asked (every(d)
  /// without an anchor, `@every`): replicas never agree on them, so such
  /// a schedule cannot be coordinated by fire key.
  [[nodiscard]] virtual bool is_process_anchored() const noexcept { return false; }

 protected:
  Schedule() = default;
  Schedule(const Schedule&) = default;
  Schedule& operator=(const Schedule&) = default;
};

using SchedulePtr = std::shared_ptr<const Schedule>;

/// The smallest interval every()/aligned_every() and `@every` accept.
inline constexpr std::chrono::nanoseconds min_interval = std::chrono::milliseconds{1};
/// The largest: 100 years of 366 days (the longest duration parse_duration() reads).
inline constexpr std::chrono::nanoseconds max_interval = std::chrono::hours{100 * 366 * 24};

/// Fires `interval` after the instant it is asked about: chained from its
/// start (as the scheduler does, passing each scheduled instant back in) it
/// yields start+interval, start+2·interval, … — anchored at its start.
/// `@every <duration>` parses to this. Throws std::invalid_argument when
/// `interval` is outside [min_interval, max_interval].
[[nodiscard]] FLEETCRON_API SchedulePtr every(std::chrono::nanoseconds interval);

/// Fires at anchor + k·interval for every integer k (so also before the
/// anchor). Throws std::invalid_argument when `interval` is below
/// min_interval or `anchor` is outside the supported range.
[[nodiscard]] FLEETCRON_API SchedulePtr every(std::chrono::nanoseconds interval, Instant anchor);

/// Fires at every multiple of `interval` since the Unix epoch, so replicas
/// started at different moments agree (24h fires at 00:00 UTC).
/// Throws std::invalid_argument when `interval` is below min_interval.
[[nodiscard]] FLEETCRON_API SchedulePtr aligned_every(std::chrono::nanoseconds interval);

/// Fires once, at `at`.
[[nodiscard]] FLEETCRON_API SchedulePtr once_at(Instant at);

/// Never fires by itself; for jobs that only run when triggered.
[[nodiscard]] FLEETCRON_API SchedulePtr manual();

/// Fires at every instant of any of `schedules`; an instant several of them
/// share fires once. Throws std::invalid_argument for an empty list or a null
/// member.
[[nodiscard]] FLEETCRON_API SchedulePtr union_of(std::vector<SchedulePtr> schedules);

/// The limit on candidates filter() inspects per next() call.
inline constexpr std::size_t filter_scan_limit = 100'000;

/// Fires at the instants of `schedule` for which `keep` returns true. `keep`
/// must be thread-safe and must not throw. next() inspects at most
/// filter_scan_limit candidates and then returns std::nullopt. Throws
/// std::invalid_argument for a null schedule or an empty `keep`.
[[nodiscard]] FLEETCRON_API SchedulePtr filter(SchedulePtr schedule, std::function<bool(Instant)> keep);

/// The limit on how many instants next_n() and between() return.
inline constexpr std::size_t enumerate_limit = 1'000'000;

/// The next `count` instants after `from`, fewer if the schedule ends.
/// Throws std::invalid_argument when `count` exceeds enumerate_limit.
[[nodiscard]] FLEETCRON_API std::vector<Instant> next_n(const Schedule& schedule, Instant from, std::size_t count);

/// The instants in the window (from, to]. Throws std::length_error when
/// there are more than enumerate_limit of them.
[[nodiscard]] FLEETCRON_API std::vector<Instant> between(const Schedule& schedule, Instant from, Instant to);

}  // namespace fleetcron
