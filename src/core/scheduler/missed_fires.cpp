#include "core/scheduler/missed_fires.h"

#include <deque>

#include "core/support/assert.h"

namespace fleetcron::detail {
namespace {

using std::chrono::nanoseconds;

// The instant `count` steps after `from`, if it is <= now.
std::optional<Instant> nth_within(const Schedule& schedule, Instant from, std::size_t count, Instant now) {
  Instant cursor = from;
  for (std::size_t i = 0; i < count; ++i) {
    auto next = schedule.next(cursor);
    if (!next || *next > now) return std::nullopt;
    cursor = *next;
  }
  return cursor;
}

}  // namespace

Instant latest_at_or_before(const Schedule& schedule, Instant first_due, Instant now) {
  FLEETCRON_ASSERT(first_due <= now);
  // Invariant: next(low) <= now, next(high) > now (or none).
  Instant low = first_due - nanoseconds{1};
  Instant high = now;
  while (high - low > nanoseconds{1}) {
    const Instant mid = low + (high - low) / 2;
    const auto next = schedule.next(mid);
    if (next && *next <= now) {
      low = mid;
    } else {
      high = mid;
    }
  }
  return schedule.next(low).value_or(first_due);
}

MissedPlan plan_missed(const Schedule& schedule, Instant first_due, Instant now, MissedFirePolicy policy) {
  MissedPlan plan;
  plan.first_missed = first_due;
  // Count (bounded), keeping the newest run_all_limit instants.
  std::deque<Instant> newest;
  Instant cursor = first_due;
  plan.missed = 1;
  newest.push_back(first_due);
  while (true) {
    auto next = schedule.next(cursor);
    if (!next || *next > now) break;
    if (plan.missed == missed_count_limit) {
      plan.count_capped = true;
      break;
    }
    ++plan.missed;
    newest.push_back(*next);
    if (newest.size() > run_all_limit) newest.pop_front();
    cursor = *next;
  }
  if (plan.count_capped) {
    plan.last_missed = latest_at_or_before(schedule, first_due, now);
    if (policy != MissedFirePolicy::run_all) newest.assign(1, plan.last_missed);
  } else {
    plan.last_missed = newest.back();
  }
  if (plan.count_capped && policy == MissedFirePolicy::run_all) {
    // Too many to walk: find the newest ones by bisection on the start.
    Instant low = first_due - nanoseconds{1};  // nth_within(low, limit) exists
    Instant high = now;
    while (high - low > nanoseconds{1}) {
      const Instant mid = low + (high - low) / 2;
      if (nth_within(schedule, mid, run_all_limit, now)) {
        low = mid;
      } else {
        high = mid;
      }
    }
    newest.clear();
    Instant walk = low;
    for (std::size_t i = 0; i < run_all_limit; ++i) {
      walk = *schedule.next(walk);
      newest.push_back(walk);
    }
  }
  switch (policy) {
    case MissedFirePolicy::skip: break;
    case MissedFirePolicy::run_once: plan.runs.push_back(plan.last_missed); break;
    case MissedFirePolicy::run_all: plan.runs.assign(newest.begin(), newest.end()); break;
  }
  plan.newest.assign(newest.begin(), newest.end());
  return plan;
}

}  // namespace fleetcron::detail
