#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/schedule/interval_schedule.h"
#include "fleetcron/duration.h"
#include "fleetcron/schedule.h"

namespace fleetcron {
namespace {

using std::chrono::nanoseconds;

// A Schedule must move forward; enumerating a broken one would never end.
void check_increasing(Instant cursor, Instant next) {
  if (next <= cursor) throw std::logic_error("schedule returned an instant not after the one it was asked about");
}

bool in_supported_range(Instant t) { return t >= min_supported_instant && t < max_supported_instant; }

std::optional<Instant> checked(Instant t) {
  if (!in_supported_range(t)) return std::nullopt;
  return t;
}

class IntervalSchedule final : public Schedule {
 public:
  IntervalSchedule(nanoseconds interval, std::optional<Instant> anchor, std::string spec)
      : interval_(interval), anchor_(anchor), spec_(std::move(spec)) {}

  std::optional<Instant> next(Instant after) const noexcept override {
    if (!in_supported_range(after)) return std::nullopt;
    // Compare before adding: after + interval can pass the int64 range.
    const nanoseconds headroom = max_supported_instant - after;
    if (!anchor_) return interval_ < headroom ? std::optional<Instant>(after + interval_) : std::nullopt;
    // The smallest anchor + k·interval strictly after `after`. Both are
    // supported instants, so their difference cannot overflow.
    nanoseconds into_step = (after - *anchor_) % interval_;
    if (into_step < nanoseconds::zero()) into_step += interval_;
    const nanoseconds remaining = interval_ - into_step;
    return remaining < headroom ? std::optional<Instant>(after + remaining) : std::nullopt;
  }
  std::string_view spec() const noexcept override { return spec_; }
  bool is_process_anchored() const noexcept override { return !anchor_.has_value(); }

 private:
  nanoseconds interval_;
  std::optional<Instant> anchor_;
  std::string spec_;
};

class OnceSchedule final : public Schedule {
 public:
  explicit OnceSchedule(Instant at) : at_(at) {}
  std::optional<Instant> next(Instant after) const noexcept override {
    if (!in_supported_range(after) || after >= at_) return std::nullopt;
    return checked(at_);
  }

 private:
  Instant at_;
};

class ManualSchedule final : public Schedule {
 public:
  std::optional<Instant> next(Instant) const noexcept override { return std::nullopt; }
  bool is_manual() const noexcept override { return true; }
};

class UnionSchedule final : public Schedule {
 public:
  explicit UnionSchedule(std::vector<SchedulePtr> members) : members_(std::move(members)) {}
  std::optional<Instant> next(Instant after) const noexcept override {
    std::optional<Instant> earliest;
    for (const auto& member : members_) {
      auto candidate = member->next(after);
      if (candidate && (!earliest || *candidate < *earliest)) earliest = candidate;
    }
    return earliest;
  }

 private:
  std::vector<SchedulePtr> members_;
};

class FilterSchedule final : public Schedule {
 public:
  FilterSchedule(SchedulePtr inner, std::function<bool(Instant)> keep)
      : inner_(std::move(inner)), keep_(std::move(keep)) {}
  std::optional<Instant> next(Instant after) const noexcept override {
    auto candidate = inner_->next(after);
    for (std::size_t inspected = 1; candidate && inspected <= filter_scan_limit; ++inspected) {
      if (keep_(*candidate)) return candidate;
      candidate = inner_->next(*candidate);
    }
    return std::nullopt;
  }
  TimeZone zone() const noexcept override { return inner_->zone(); }

 private:
  SchedulePtr inner_;
  std::function<bool(Instant)> keep_;
};

void check_interval(std::string_view function, nanoseconds interval) {
  if (interval < min_interval) {
    throw std::invalid_argument(fmt::format("{}: interval {} below minimum {}", function, format_duration(interval),
                                            format_duration(min_interval)));
  }
  if (interval > max_interval) {
    throw std::invalid_argument(fmt::format("{}: interval {} above maximum {}", function, format_duration(interval),
                                            format_duration(max_interval)));
  }
}

}  // namespace

namespace detail {
SchedulePtr make_interval_schedule(nanoseconds interval, std::optional<Instant> anchor, std::string spec) {
  return std::make_shared<IntervalSchedule>(interval, anchor, std::move(spec));
}
}  // namespace detail

SchedulePtr every(nanoseconds interval) {
  check_interval("every", interval);
  return detail::make_interval_schedule(interval, std::nullopt, {});
}

SchedulePtr every(nanoseconds interval, Instant anchor) {
  check_interval("every", interval);
  if (!in_supported_range(anchor)) {
    throw std::invalid_argument("every: anchor outside the supported range (1970 to 2199)");
  }
  return detail::make_interval_schedule(interval, anchor, {});
}

SchedulePtr aligned_every(nanoseconds interval) {
  check_interval("aligned_every", interval);
  return detail::make_interval_schedule(interval, Instant{}, {});
}

SchedulePtr once_at(Instant at) { return std::make_shared<OnceSchedule>(at); }

SchedulePtr manual() { return std::make_shared<ManualSchedule>(); }

SchedulePtr union_of(std::vector<SchedulePtr> schedules) {
  if (schedules.empty()) throw std::invalid_argument("union_of: no schedules");
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    if (!schedules[i]) throw std::invalid_argument(fmt::format("union_of: schedule {} is null", i));
  }
  return std::make_shared<UnionSchedule>(std::move(schedules));
}

SchedulePtr filter(SchedulePtr schedule, std::function<bool(Instant)> keep) {
  if (!schedule) throw std::invalid_argument("filter: schedule is null");
  if (!keep) throw std::invalid_argument("filter: keep is empty");
  return std::make_shared<FilterSchedule>(std::move(schedule), std::move(keep));
}

std::vector<Instant> next_n(const Schedule& schedule, Instant from, std::size_t count) {
  if (count > enumerate_limit) {
    throw std::invalid_argument(fmt::format("next_n: count {} above limit {}", count, enumerate_limit));
  }
  std::vector<Instant> out;
  out.reserve(std::min<std::size_t>(count, 1024));
  Instant cursor = from;
  while (out.size() < count) {
    auto next = schedule.next(cursor);
    if (!next) break;
    check_increasing(cursor, *next);
    out.push_back(*next);
    cursor = *next;
  }
  return out;
}

std::vector<Instant> between(const Schedule& schedule, Instant from, Instant to) {
  std::vector<Instant> out;
  Instant cursor = from;
  while (true) {
    auto next = schedule.next(cursor);
    if (!next || *next > to) break;
    check_increasing(cursor, *next);
    if (out.size() == enumerate_limit) {
      throw std::length_error(fmt::format("between: more than {} instants in the window", enumerate_limit));
    }
    out.push_back(*next);
    cursor = *next;
  }
  return out;
}

}  // namespace fleetcron
