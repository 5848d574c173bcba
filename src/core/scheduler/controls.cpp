// Fleet-wide controls on this replica (docs/fleet-state.md#controls): the
// upkeep thread reads them every control_poll_interval (and announces the
// replica, registry.cpp), pauses and resumes the keyed entries the fleet
// paused or resumed, and takes the triggers of its entries from the
// store, each then run here once as a manual fire.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "core/scheduler/ledger_records.h"
#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

namespace {

// Trigger ids a replica remembers as gone (taken or expired), at most.
constexpr std::size_t max_remembered_triggers = 4096;
// The longest a trigger's write may land after its stamp (the requester's
// compare-and-swap rounds): a trigger requested longer than this before a
// read that did not list it was taken (or dropped) and came back.
constexpr std::chrono::minutes returned_trigger_margin{1};

}  // namespace

using detail::Entry;
using detail::Fire;
using detail::FireKind;

void Scheduler::Impl::poll_controls() {
  // One poll at a time (two start() calls, or start() and the thread),
  // and never an exception out of it: a fleet state may throw.
  std::lock_guard poll(controls_poll_mutex_);
  try {
    poll_controls_once();
  } catch (...) {
    log(LogLevel::warning, "fleet controls not applied: " + detail::describe_exception(std::current_exception()));
  }
}

bool Scheduler::Impl::controls_stopping() {
  std::lock_guard guard(controls_mutex_);
  return controls_stopping_;
}

void Scheduler::Impl::poll_controls_once() {
  const Instant read_at = fleet_now();
  const ControlsRead read = options_.fleet.state->read_controls(read_at);
  if (read.status == ControlsRead::Status::error) {
    if (!controls_failing_) {
      log(LogLevel::warning, "fleet controls unreadable; pauses, resumes and triggers wait until they are: " + read.error);
    }
    controls_failing_ = true;
    return;
  }
  if (controls_failing_) log(LogLevel::info, "fleet controls readable again");
  controls_failing_ = false;
  const std::unordered_set<std::string> returned = returned_triggers(read, read_at);
  ControlsApplied applied;
  std::vector<detail::TakenTrigger> triggers;
  {
    std::lock_guard guard(mutex_);
    std::unordered_set<std::string> listed;
    for (const auto* controls : {&read.jobs, &read.resumed}) {
      for (const JobControl& control : *controls) {
        listed.insert(control.job_key);
        const auto it = keys_.find(control.job_key);
        if (it == keys_.end()) continue;
        const std::shared_ptr<Entry>& entry = entries_.at(it->second);
        for (const TriggerRequest& trigger : control.triggers) triggers.push_back({entry, trigger});
        apply_fleet_pause(control, entry, applied);
      }
    }
    forget_unlisted_pauses(listed, applied);
  }
  loop_cv_.notify_one();
  for (const auto& note : applied.notes) log(LogLevel::info, note);
  for (const auto& warning : applied.warnings) log(LogLevel::warning, warning);
  for (auto& event : applied.events) publish(std::move(event));
  // Takes whose answer was lost while the controls were unreadable: ours if
  // a tombstone names this replica (one listed again is taken anew below).
  const std::vector<detail::TakenTrigger> unanswered = std::exchange(takes_unanswered_, {});
  take_triggers(triggers, returned);
  for (const detail::TakenTrigger& taken : unanswered) {
    if (taken_here_in(read, taken) && !controls_stopping()) run_taken(taken);
  }
  if (!expiries_unanswered_.empty()) report_unanswered_expiries(read);
  if (!read.expired.empty()) report_expired_triggers(read.expired, read_at);
}

void Scheduler::Impl::report_unanswered_expiries(const ControlsRead& read) {
  // Gone since a drop whose answer was lost: the write may have been ours.
  std::vector<JobTrigger> gone;
  for (JobTrigger& seen : std::exchange(expiries_unanswered_, {})) {
    const auto same_id = [&](const TriggerRequest& t) { return t.id == seen.trigger.id; };
    const auto same_trigger = [&](const JobTrigger& t) { return same_id(t.trigger); };
    const bool listed = std::any_of(read.expired.begin(), read.expired.end(), same_trigger) ||
                        std::any_of(read.taken.begin(), read.taken.end(), same_trigger) ||
                        std::any_of(read.jobs.begin(), read.jobs.end(), [&](const JobControl& job) {
                          return std::any_of(job.triggers.begin(), job.triggers.end(), same_id);
                        });
    if (!listed) gone.push_back(std::move(seen));
  }
  report_expired(gone, " (its drop's answer was lost: the drop may have been this replica's, or another's that "
                       "reported it too)");
}

namespace {

/// The warning for a pause or resume (`was_paused`, at `at` by `by`) that
/// the store no longer has.
std::string lost_control(const std::string& job_key, bool was_paused, Instant at, const std::string& by,
                         bool now_paused, bool record_gone) {
  return fmt::format("entry \"{}\": the fleet state lost its {} of {} by {} and now says {} (the store restarted "
                     "from an older snapshot, or failed over to a replica behind it{}); {} it again if it should {}",
                     job_key, was_paused ? "pause" : "resume", format_rfc3339(at), by, now_paused ? "paused" : "running",
                     record_gone ? ", or a fleetcron older than this one resumed it, or edited the controls, and left no "
                                   "record of the resume"
                                 : "",
                     was_paused ? "pause" : "resume", was_paused ? "stay paused" : "run");
}

}  // namespace

void Scheduler::Impl::apply_fleet_pause(const JobControl& control, const std::shared_ptr<Entry>& entry,
                                        ControlsApplied& applied) {
  // Applied when it changes, or to an entry first seen (a new one, or one
  // a reload added again under the same key).
  auto [seen, first] = fleet_paused_.try_emplace(control.job_key);
  FleetPause& known = seen->second;
  if (first || known.entry != entry->identity.id) {
    known = FleetPause{};
    known.entry = entry->identity.id;
    first = true;
  }
  // An older line that says otherwise: the store lost the change applied
  // here (one that says the same changes nothing the operator must redo).
  if (control.changed_at < known.changed_at && control.paused != known.paused) {
    applied.warnings.push_back(
        lost_control(control.job_key, known.paused, known.changed_at, known.changed_by, control.paused, false));
  }
  known.changed_at = control.changed_at;
  known.changed_by = control.changed_by;
  if (known.paused == control.paused && !(first && control.paused)) return;
  known.paused = control.paused;
  // Paused fleet-wide, what it missed is not caught up later: a resume
  // starts from now, on a replica restarted during the pause too.
  if (control.paused && entry->cursor) entry->cursor->caught_up = true;
  set_paused_locked(entry, control.paused, applied.events);
  applied.notes.push_back(fmt::format("entry \"{}\": {} fleet-wide by {} at {}", control.job_key,
                                      control.paused ? "paused" : "resumed", control.changed_by,
                                      format_rfc3339(control.changed_at)));
}

void Scheduler::Impl::forget_unlisted_pauses(const std::unordered_set<std::string>& listed, ControlsApplied& applied) {
  for (auto it = fleet_paused_.begin(); it != fleet_paused_.end();) {
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    // No longer listed: a pause's record stays until its resume, and a
    // resume's for resume_record_keep, so a pause gone is a store that went
    // back (or an older fleetcron's resume). Running again either way.
    FleetPause& known = it->second;
    const auto key = keys_.find(it->first);
    const std::shared_ptr<Entry> entry = key == keys_.end() ? nullptr : entries_.at(key->second);
    const bool ours = entry && entry->identity.id == known.entry;
    if (ours && !known.paused) {  // its resume's line aged out: kept, to tell an older pause coming back
      ++it;
      continue;
    }
    if (ours) {
      if (known.changed_at != Instant{}) {
        applied.warnings.push_back(
            lost_control(it->first, known.paused, known.changed_at, known.changed_by, false, true));
      }
      set_paused_locked(entry, false, applied.events);
      applied.notes.push_back(fmt::format("entry \"{}\": resumed fleet-wide", it->first));
      known = FleetPause{};  // reported: nothing applied to compare with any more
      known.entry = entry->identity.id;
      ++it;
      continue;
    }
    it = fleet_paused_.erase(it);
  }
}

std::unordered_set<std::string> Scheduler::Impl::returned_triggers(const ControlsRead& read, Instant read_at) {
  const auto now = clock_->steady_now();
  while (!triggers_gone_order_.empty() &&
         (now - triggers_gone_order_.front().first > max_trigger_wait ||
          triggers_gone_order_.size() > max_remembered_triggers)) {
    triggers_gone_.erase(triggers_gone_order_.front().second);
    triggers_gone_order_.pop_front();
  }
  std::unordered_set<std::string> listed, returned;
  for (const JobControl& control : read.jobs) {
    for (const TriggerRequest& trigger : control.triggers) {
      listed.insert(trigger.id);
      // Written at most returned_trigger_margin after its stamp, so a read
      // later than that which did not list it means it was there and went.
      const bool unseen_before = !triggers_listed_.contains(trigger.id) && controls_read_at_ &&
                                 trigger.requested_at + returned_trigger_margin < *controls_read_at_;
      if (triggers_gone_.contains(trigger.id) || unseen_before) returned.insert(trigger.id);
    }
  }
  for (const std::string& id : triggers_listed_) {
    if (listed.contains(id) || !triggers_gone_.insert(id).second) continue;
    triggers_gone_order_.emplace_back(now, id);
  }
  triggers_listed_ = std::move(listed);
  controls_read_at_ = read_at;
  return returned;
}

void Scheduler::Impl::report_expired_triggers(const std::vector<JobTrigger>& seen, Instant read_at) {
  // As of the read: a trigger expiring since is dropped at the next poll,
  // so that every one a lost answer may have dropped is among `seen`.
  const ControlsRead dropped = options_.fleet.state->drop_expired_triggers(read_at);
  if (dropped.status == ControlsRead::Status::error) {
    log(LogLevel::warning, "fleet controls: expired triggers not dropped (tried again at the next poll): " + dropped.error);
    expiries_unanswered_ = seen;
    return;
  }
  report_expired(dropped.expired, "");
}

void Scheduler::Impl::report_expired(const std::vector<JobTrigger>& expired_triggers, std::string_view note) {
  for (const JobTrigger& expired : expired_triggers) {
    const TriggerRequest& trigger = expired.trigger;
    TriggerExpiredEvent event{.job_key = expired.job_key,
                              .trigger_id = trigger.id,
                              .requested_by = trigger.requested_by,
                              .requested_at = trigger.requested_at,
                              .expires_at = trigger.expires_at,
                              .note = std::string(note)};
    log(LogLevel::warning, fmt::format("job \"{}\": {}", event.job_key, detail::trigger_expired_text(event)));
    publish(std::move(event));  // its ledger record comes from the event (LedgerWriter)
  }
}

std::optional<bool> Scheduler::Impl::taken_here(const detail::TakenTrigger& taken) {
  ControlsRead read;
  try {
    read = options_.fleet.state->read_controls(fleet_now());
  } catch (...) {
    return std::nullopt;
  }
  if (read.status != ControlsRead::Status::found) return std::nullopt;
  return taken_here_in(read, taken);
}

bool Scheduler::Impl::taken_here_in(const ControlsRead& read, const detail::TakenTrigger& taken) const {
  return std::any_of(read.taken.begin(), read.taken.end(), [&](const JobTrigger& t) {
    return t.job_key == taken.entry->identity.key && t.trigger.id == taken.trigger.id &&
           t.trigger.requested_by == options_.fleet.replica_id;
  });
}

void Scheduler::Impl::take_triggers(const std::vector<detail::TakenTrigger>& triggers,
                                    const std::unordered_set<std::string>& returned) {
  for (const auto& taken : triggers) {
    // Once stop() began, a trigger is left in the store for a replica that
    // stays (a taken one could only be cancelled here); so it is while this
    // replica's settings are not the fleet's.
    if (controls_stopping() || !settings_refusal().empty()) return;
    const ControlChange change = options_.fleet.state->take_trigger(taken.entry->identity.key, taken.trigger.id,
                                                                    fleet_now(), options_.fleet.replica_id);
    const std::optional<bool> ours =
        change.status == ControlChange::Status::error ? taken_here(taken) : std::optional<bool>(true);
    if (!ours) {  // unknown: the controls unreadable too; looked at again at the next poll
      log(LogLevel::warning, fmt::format("entry \"{}\": trigger {}: the take's answer was lost ({}) and the controls "
                                         "could not be read; looked at again at the next poll",
                                         taken.entry->identity.key, taken.trigger.id, change.error));
      takes_unanswered_.push_back(taken);
      continue;
    }
    if (!*ours) {
      log(LogLevel::warning, fmt::format("entry \"{}\": trigger {} not taken: {}", taken.entry->identity.key,
                                         taken.trigger.id, change.error));
      continue;
    }
    if (change.status == ControlChange::Status::error) {
      log(LogLevel::info, fmt::format("entry \"{}\": trigger {}: the take's answer was lost ({}), but the "
                                      "controls name this replica as its taker",
                                      taken.entry->identity.key, taken.trigger.id, change.error));
    } else if (change.status != ControlChange::Status::changed) {
      continue;  // another replica took it
    }
    if (returned.contains(taken.trigger.id)) {
      log(LogLevel::warning,
          fmt::format("entry \"{}\": trigger {} by {} came back after it was taken (its request sent again, or "
                      "the store went back: a restart from a snapshot, a lagging failover); dropped, not run again",
                      taken.entry->identity.key, taken.trigger.id, taken.trigger.requested_by));
      continue;
    }
    run_taken(taken);
  }
}

void Scheduler::Impl::run_taken(const detail::TakenTrigger& taken) {
  log(LogLevel::info, fmt::format("entry \"{}\": trigger {} by {} taken, running it here", taken.entry->identity.key,
                                  taken.trigger.id, taken.trigger.requested_by));
  std::vector<Fire> batch{Fire{taken.entry, taken.trigger.requested_at, FireKind::manual}};
  const bool stopping = enqueue(batch);
  if (stopping || !batch.empty()) {
    log(LogLevel::warning, fmt::format("entry \"{}\": trigger {} taken but not run: {}", taken.entry->identity.key,
                                       taken.trigger.id,
                                       stopping ? "the scheduler is stopping" : "the run queue is full"));
  }
}

void Scheduler::Impl::upkeep_main() {
  using std::chrono::nanoseconds;
  const auto never = Clock::SteadyTime::max();
  const nanoseconds heartbeat = options_.fleet.registry_heartbeat_interval;
  // A run that started is listed within a second (at most one extra
  // announcement a second), so a death soon after its start still shows.
  const nanoseconds early = std::min<nanoseconds>(std::chrono::seconds{1}, heartbeat);
  const auto start = clock_->steady_now();
  auto next_poll = controls_on() ? start + options_.fleet.control_poll_interval : never;
  auto next_announce = registry_on() ? start + heartbeat : never;
  auto last_announce = start;
  std::unique_lock lock(controls_mutex_);
  while (!upkeep_stopping_) {
    const auto now = clock_->steady_now();
    const auto announce_at = runs_unlisted_ ? std::min(next_announce, last_announce + early) : next_announce;
    const auto poll_at = controls_stopping_ ? never : next_poll;
    const auto due = std::min(announce_at, poll_at);
    if (now < due) {  // woken early (a run started, a stop): look again
      clock_->wait_until(controls_cv_, lock, std::min(due, now + std::chrono::hours{1}));
      continue;
    }
    const bool announcing = now >= announce_at;
    if (announcing) {  // the runs started from here on are listed next time
      runs_unlisted_ = false;
      runs_unlisted_flag_.store(false, std::memory_order_relaxed);
    }
    lock.unlock();
    if (announcing) {
      // A failed announcement is tried again sooner: a fifth of the period.
      const bool answered = announce().status != ReplicaAnnounce::Status::error;
      last_announce = now;
      next_announce = now + (answered ? heartbeat : heartbeat / 5);
      if (answered) catalogue_if_due();
    }
    if (now >= poll_at) {
      poll_controls();
      next_poll = now + options_.fleet.control_poll_interval;
    }
    lock.lock();
  }
}

void Scheduler::Impl::stop_upkeep() {
  {
    std::lock_guard guard(controls_mutex_);
    upkeep_stopping_ = true;
  }
  controls_cv_.notify_all();
}

void Scheduler::Impl::stop_controls() {
  {
    std::lock_guard guard(controls_mutex_);
    controls_stopping_ = true;
  }
  controls_cv_.notify_all();
}

}  // namespace fleetcron
