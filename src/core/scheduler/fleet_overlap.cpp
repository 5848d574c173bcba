// Fleet-wide overlap (docs/fleet-state.md#fleet-wide-overlap): a keyed,
// coordinated entry with overlap=skip or queue starts a run only if no
// other live replica lists a run of the same job in the replica registry,
// and lists its own in the same compare-and-swap; it unlists it when the
// run ends, before the end is reported.
#include <fmt/format.h>

#include <algorithm>

#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

using detail::Fire;

namespace {

// How often a queued fire looks again at the run it waits for: within a
// second of its end, at most a heartbeat (the run's end is announced at once).
constexpr std::chrono::seconds queue_recheck_interval{1};

std::string describe_busy(const ReplicaAnnounce& busy) {
  const RunningFire& run = *busy.busy_run;
  return fmt::format("the previous run still goes on replica {}: fire {}, started {}", busy.busy_on, run.fire_key,
                     format_rfc3339(run.started_at));
}

}  // namespace

bool Scheduler::Impl::fleet_overlap_applies(const Fire& fire) const {
  const detail::Entry& entry = *fire.entry;
  return registry_on() && !fire.manual() && entry.overlap && !entry.identity.key.empty() &&
         (entry.settings->claimer || entry.settings->leader_gated);
}

bool Scheduler::Impl::enter_fleet_overlap(const Fire& fire, detail::Run& run, detail::WorkerSlot& slot,
                                          const FireContext& context) {
  detail::RegistryMembership::AloneRun alone{
      RunningFire{fire.entry->identity.key, context.fire_key, context.scheduled_at, context.fence,
                  cursor_instant(clock_->now()), context.recovery, false},
      {}};
  alone.written = [&] {  // the heartbeats list it from here, with the start written
    std::lock_guard guard(slot.mutex);
    run.awaiting_fleet = false;
    run.started_at = alone.fire.started_at;
  };
  const auto recheck = std::min<std::chrono::nanoseconds>(queue_recheck_interval, options_.fleet.registry_heartbeat_interval);
  bool waiting = false;
  for (;;) {
    alone.fire.started_at = cursor_instant(clock_->now());
    ReplicaAnnounce answer = membership_->announce_alone(alone);
    if (answer.status == ReplicaAnnounce::Status::accepted || answer.status == ReplicaAnnounce::Status::refused) {
      if (waiting) log(LogLevel::info, fmt::format("fire {} starts: the previous run of its job ended", context.fire_key));
      return true;
    }
    if (answer.status == ReplicaAnnounce::Status::error) {
      report_skip(fire, SkipReason::registry_error,
                  "fleet-wide overlap could not be checked (fail closed): the replica registry failed: " + answer.error);
      return false;
    }
    if (fire.entry->settings->overlap == OverlapPolicy::skip) {
      report_skip(fire, SkipReason::overlap, describe_busy(answer));
      return false;
    }
    if (!waiting) {
      log(LogLevel::info, fmt::format("fire {} waits (overlap=queue): {}", context.fire_key, describe_busy(answer)));
      waiting = true;
    }
    if (!sleep_for(recheck, run.stop.get_token())) {
      report_cancel(fire, "stopped while waiting for the previous run elsewhere in the fleet",
                    CancelReason::stopped_before_start);
      return false;
    }
  }
}

}  // namespace fleetcron
