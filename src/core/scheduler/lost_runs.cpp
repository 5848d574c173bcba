// Lost runs (docs/fleet-state.md#lost-runs): each replica lists its runs
// in progress in its registry record; the one replica whose announcement
// drops an expired record reports that record's runs lost, and re-runs
// those whose entry says recover=rerun.
#include <fmt/format.h>

#include <algorithm>

#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

using detail::Entry;

std::vector<RunningFire> Scheduler::Impl::running_fires() {
  std::vector<RunningFire> alone, runs;
  for (const auto& slot : runs_.slots()) {
    std::lock_guard guard(slot->mutex);
    const FireContext* context = slot->run && !slot->run->awaiting_fleet ? slot->run->context : nullptr;
    if (context == nullptr || !context->entry || context->entry->key.empty()) continue;
    (slot->run->alone ? alone : runs)
        .push_back(RunningFire{context->entry->key, context->fire_key, context->scheduled_at, context->fence,
                               cursor_instant(slot->run->started_at), context->recovery, context->manual});
  }
  // The runs listed alone first: a record cut to its size keeps them, and
  // with them the fleet-wide overlap rule (fit_record() drops from the end).
  const std::size_t room = max_listed_runs - std::min(alone.size(), max_listed_runs);
  if (runs.size() > room) {  // the oldest: the longer a run, the likelier a death catches it
    std::nth_element(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(room), runs.end(),
                     [](const RunningFire& a, const RunningFire& b) { return a.started_at < b.started_at; });
    runs.resize(room);
  }
  alone.resize(std::min(alone.size(), max_listed_runs));
  alone.insert(alone.end(), std::make_move_iterator(runs.begin()), std::make_move_iterator(runs.end()));
  return alone;
}

std::string Scheduler::Impl::rerun_lost(const RunningFire& run) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard guard(mutex_);
    const auto it = keys_.find(run.job_key);
    if (it != keys_.end()) entry = entries_.at(it->second);
  }
  if (!entry) return "this replica does not run the job";
  const detail::EntrySettings& settings = *entry->settings;
  if (settings.recover != RecoverPolicy::rerun) return "recover=report";
  if (run.recovery >= settings.recover_max) {
    return fmt::format("re-run {} time(s) already, the limit (recover_max)", run.recovery);
  }
  if (const auto age = fleet_now() - run.scheduled_at; age > settings.recover_within) {
    return fmt::format("{} old, beyond recover_within ({})", format_duration(age), format_duration(settings.recover_within));
  }
  if (run.manual) return "a manual run (trigger it again)";
  if (!settings.claimer && !settings.leader_gated) return "the entry is not coordinated (each replica runs its own fires)";
  // The verdict as it stands: never an announcement from here (this runs
  // inside RegistryMembership::announce()'s report, through RegistryHost).
  if (auto verdict = registry_verdict(); !verdict || !verdict->empty()) {
    return verdict ? *verdict : std::string("this replica's settings are not verified");
  }
  std::vector<detail::Fire> batch{detail::Fire{entry, run.scheduled_at, detail::FireKind::recovery}};
  batch.front().recovery = run.recovery + 1;
  batch.front().recovered_fence = run.fence;
  if (enqueue(batch)) return "the scheduler is stopping";
  if (!batch.empty()) return "the run queue is full";
  return {};
}

void Scheduler::Impl::report_lost(const std::vector<ReplicaRecord>& expired) {
  for (const ReplicaRecord& record : expired) {
    for (const RunningFire& run : record.replica.runs) {
      LostFireEvent event{.job_key = run.job_key,
                          .fire_key = run.fire_key,
                          .scheduled_at = run.scheduled_at,
                          .replica_id = record.replica.replica_id,
                          .host = record.replica.host,
                          .fence = run.fence,
                          .started_at = run.started_at,
                          .last_beat = record.beat,
                          .expired_at = record.expires_at};
      event.not_rerun = rerun_lost(run);
      event.rerun = event.not_rerun.empty();
      if (options_.log_events) {
        log(LogLevel::error,
            fmt::format("fire {} lost: its runner, replica {} on {}, stopped announcing itself (last beat {}) while it "
                        "ran (fence {}, started {}); {}",
                        event.fire_key, event.replica_id, event.host, format_rfc3339(event.last_beat), event.fence,
                        format_rfc3339(event.started_at),
                        event.rerun ? fmt::format("running it again here (recovery {})", run.recovery + 1)
                                    : "not run again: " + event.not_rerun));
      }
      // The ledger's lost record comes from the event (LedgerWriter): the
      // report happens once, the store handed it to this replica alone.
      publish(std::move(event));
    }
  }
}

}  // namespace fleetcron
