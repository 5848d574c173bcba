// The fleet-wide controls on one replica (docs/fleet-state.md#controls):
// read every control_poll_interval by the upkeep thread, applied to this
// replica's keyed entries; the triggers it takes run here once each.
#include "core/scheduler/fleet_controls.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/scheduler/ledger_records.h"
#include "core/support/describe_exception.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::detail {

namespace {

// Trigger ids a replica remembers as gone (taken or expired), at most.
constexpr std::size_t max_remembered_triggers = 4096;
// The longest a trigger's write may land after its stamp (the requester's
// compare-and-swap rounds): a trigger requested longer than this before a
// read that did not list it was taken (or dropped) and came back.
constexpr std::chrono::minutes returned_trigger_margin{1};

}  // namespace

std::string pause_on_failure_author(std::string_view replica_id) {
  constexpr std::string_view prefix = "on-failure@";
  constexpr std::size_t max_author_bytes = 64;  // check_control_author()
  return std::string(prefix) + std::string(replica_id.substr(0, max_author_bytes - prefix.size()));
}

FleetControls::FleetControls(Host& host, std::shared_ptr<FleetState> state, std::string replica_id,
                             std::shared_ptr<Clock> clock)
    : host_(host), state_(std::move(state)), replica_id_(std::move(replica_id)), clock_(std::move(clock)) {}

void FleetControls::stop() {
  stopping_ = true;                      // no trigger taken from here on
  std::lock_guard in_flight(poll_mutex_);  // and none by a poll still going
  try {
    write_requested_pauses(true);
  } catch (...) {
    host_.log(LogLevel::warning, "fleet controls: pauses not written: " + describe_exception(std::current_exception()));
  }
}

bool FleetControls::request_pause(const std::string& job_key, EntryId entry, std::string by) {
  {
    std::lock_guard guard(requested_mutex_);
    if (!requests_closed_) {
      const bool queued = std::any_of(requested_pauses_.begin(), requested_pauses_.end(),
                                      [&](const RequestedPause& p) { return p.job_key == job_key && p.entry == entry; });
      if (!queued) requested_pauses_.push_back({job_key, entry, std::move(by)});
      return true;
    }
  }
  // Stopping: no poll will write it (a run that failed during the drain).
  auto [failed, error] = write_pauses({{job_key, entry, std::move(by)}});
  if (!failed.empty()) {
    host_.log(LogLevel::warning, fmt::format("fleet controls: the pause of \"{}\" after a failed run was not written "
                                             "fleet-wide (paused here; stopping: no more tries): {}",
                                             job_key, error));
  }
  return false;
}

std::pair<std::vector<FleetControls::RequestedPause>, std::string> FleetControls::write_pauses(
    std::vector<RequestedPause> pauses) {
  // Only for entries still here and paused: one a reload removed or
  // replaced, or that was resumed here meanwhile, is not paused for the fleet.
  host_.with_entries([&](EntryTable& table) {
    std::erase_if(pauses, [&](const RequestedPause& pause) {
      const std::shared_ptr<Entry> entry = table.find(pause.job_key);
      return !entry || entry->identity.id != pause.entry || !entry->paused.load();
    });
  });
  std::vector<RequestedPause> failed;
  std::string error;
  for (RequestedPause& pause : pauses) {
    ControlChange change;
    try {
      change = state_->set_paused(pause.job_key, true, pause.by, host_.fleet_now());
    } catch (...) {
      change = {ControlChange::Status::error, {}, describe_exception(std::current_exception())};
    }
    if (change.status == ControlChange::Status::error) {
      if (error.empty()) error = change.error;
      failed.push_back(std::move(pause));
    } else if (change.status == ControlChange::Status::changed) {
      host_.log(LogLevel::info,
                fmt::format("entry \"{}\": paused fleet-wide by {} after a failed run", pause.job_key, pause.by));
    }
  }
  return {std::move(failed), std::move(error)};
}

void FleetControls::write_requested_pauses(bool last_try) {
  std::vector<RequestedPause> requested;
  {
    std::lock_guard guard(requested_mutex_);
    requested.swap(requested_pauses_);
    if (last_try) requests_closed_ = true;
  }
  if (requested.empty()) return;
  auto [failed, error] = write_pauses(std::move(requested));
  if (!failed.empty() && (last_try || !pause_write_failing_)) {
    host_.log(LogLevel::warning,
              fmt::format("fleet controls: {} pause(s) after a failed run not written fleet-wide ({}; paused here){}: {}",
                          failed.size(), failed.front().job_key,
                          last_try ? ", and no more tries: stopping" : ", tried again at each poll", error));
  }
  pause_write_failing_ = !failed.empty();
  if (last_try || failed.empty()) return;
  std::lock_guard guard(requested_mutex_);
  requested_pauses_.insert(requested_pauses_.begin(), std::make_move_iterator(failed.begin()),
                           std::make_move_iterator(failed.end()));
}

void FleetControls::poll() {
  // One poll at a time (two start() calls, or start() and the thread),
  // and never an exception out of it: a fleet state may throw.
  std::lock_guard poll(poll_mutex_);
  try {
    poll_once();
  } catch (...) {
    host_.log(LogLevel::warning, "fleet controls not applied: " + describe_exception(std::current_exception()));
  }
}

void FleetControls::poll_once() {
  write_requested_pauses(false);
  const Instant read_at = host_.fleet_now();
  const ControlsRead read = state_->read_controls(read_at);
  if (read.status == ControlsRead::Status::error) {
    if (!failing_) {
      host_.log(LogLevel::warning, "fleet controls unreadable; pauses, resumes and triggers wait until they are: " + read.error);
    }
    failing_ = true;
    return;
  }
  if (failing_) host_.log(LogLevel::info, "fleet controls readable again");
  failing_ = false;
  const std::unordered_set<std::string> returned = returned_triggers(read, read_at);
  Applied applied;
  std::vector<TakenTrigger> triggers;
  host_.with_entries([&](EntryTable& table) {
    std::unordered_set<std::string> listed;
    for (const auto* controls : {&read.jobs, &read.resumed}) {
      for (const JobControl& control : *controls) {
        listed.insert(control.job_key);
        const std::shared_ptr<Entry> entry = table.find(control.job_key);
        if (!entry) continue;
        for (const TriggerRequest& trigger : control.triggers) triggers.push_back({entry, trigger});
        apply_pause(control, entry, table, applied);
      }
    }
    forget_unlisted(listed, table, applied);
  });
  for (const auto& note : applied.notes) host_.log(LogLevel::info, note);
  for (const auto& warning : applied.warnings) host_.log(LogLevel::warning, warning);
  for (auto& event : applied.events) host_.publish(std::move(event));
  // Takes whose answer was lost while the controls were unreadable: ours if
  // a tombstone names this replica (one listed again is taken anew below).
  const std::vector<TakenTrigger> unanswered = std::exchange(takes_unanswered_, {});
  take_triggers(triggers, returned);
  for (const TakenTrigger& taken : unanswered) {
    if (taken_here_in(read, taken) && !stopping_) run_taken(taken);
  }
  if (!expiries_unanswered_.empty()) report_unanswered_expiries(read);
  if (!read.expired.empty()) report_expired_triggers(read.expired, read_at);
}

void FleetControls::report_unanswered_expiries(const ControlsRead& read) {
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

void FleetControls::apply_pause(const JobControl& control, const std::shared_ptr<Entry>& entry, EntryTable& table,
                                Applied& applied) {
  // Applied when it changes, or to an entry first seen (a new one, or one
  // a reload added again under the same key).
  auto [seen, first] = known_pauses_.try_emplace(control.job_key);
  KnownPause& known = seen->second;
  if (first || known.entry != entry->identity.id) {
    known = KnownPause{};
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
  table.set_paused(entry, control.paused, applied.events);
  applied.notes.push_back(fmt::format("entry \"{}\": {} fleet-wide by {} at {}", control.job_key,
                                      control.paused ? "paused" : "resumed", control.changed_by,
                                      format_rfc3339(control.changed_at)));
}

void FleetControls::forget_unlisted(const std::unordered_set<std::string>& listed, EntryTable& table,
                                    Applied& applied) {
  for (auto it = known_pauses_.begin(); it != known_pauses_.end();) {
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    // No longer listed: a pause's record stays until its resume, and a
    // resume's for resume_record_keep, so a pause gone is a store that went
    // back (or an older fleetcron's resume). Running again either way.
    KnownPause& known = it->second;
    const std::shared_ptr<Entry> entry = table.find(it->first);
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
      table.set_paused(entry, false, applied.events);
      applied.notes.push_back(fmt::format("entry \"{}\": resumed fleet-wide", it->first));
      known = KnownPause{};  // reported: nothing applied to compare with any more
      known.entry = entry->identity.id;
      ++it;
      continue;
    }
    it = known_pauses_.erase(it);
  }
}

std::unordered_set<std::string> FleetControls::returned_triggers(const ControlsRead& read, Instant read_at) {
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
      const bool unseen_before = !triggers_listed_.contains(trigger.id) && read_at_ &&
                                 trigger.requested_at + returned_trigger_margin < *read_at_;
      if (triggers_gone_.contains(trigger.id) || unseen_before) returned.insert(trigger.id);
    }
  }
  for (const std::string& id : triggers_listed_) {
    if (listed.contains(id) || !triggers_gone_.insert(id).second) continue;
    triggers_gone_order_.emplace_back(now, id);
  }
  triggers_listed_ = std::move(listed);
  read_at_ = read_at;
  return returned;
}

void FleetControls::report_expired_triggers(const std::vector<JobTrigger>& seen, Instant read_at) {
  // As of the read: a trigger expiring since is dropped at the next poll,
  // so that every one a lost answer may have dropped is among `seen`.
  const ControlsRead dropped = state_->drop_expired_triggers(read_at);
  if (dropped.status == ControlsRead::Status::error) {
    host_.log(LogLevel::warning, "fleet controls: expired triggers not dropped (tried again at the next poll): " + dropped.error);
    expiries_unanswered_ = seen;
    return;
  }
  report_expired(dropped.expired, "");
}

void FleetControls::report_expired(const std::vector<JobTrigger>& expired_triggers, std::string_view note) {
  for (const JobTrigger& expired : expired_triggers) {
    const TriggerRequest& trigger = expired.trigger;
    TriggerExpiredEvent event{.job_key = expired.job_key,
                              .trigger_id = trigger.id,
                              .requested_by = trigger.requested_by,
                              .requested_at = trigger.requested_at,
                              .expires_at = trigger.expires_at,
                              .note = std::string(note)};
    host_.log(LogLevel::warning, fmt::format("job \"{}\": {}", event.job_key, trigger_expired_text(event)));
    host_.publish(std::move(event));  // its ledger record comes from the event (LedgerWriter)
  }
}

std::optional<bool> FleetControls::taken_here(const TakenTrigger& taken) {
  ControlsRead read;
  try {
    read = state_->read_controls(host_.fleet_now());
  } catch (...) {
    return std::nullopt;
  }
  if (read.status != ControlsRead::Status::found) return std::nullopt;
  return taken_here_in(read, taken);
}

bool FleetControls::taken_here_in(const ControlsRead& read, const TakenTrigger& taken) const {
  return std::any_of(read.taken.begin(), read.taken.end(), [&](const JobTrigger& t) {
    return t.job_key == taken.entry->identity.key && t.trigger.id == taken.trigger.id &&
           t.trigger.requested_by == replica_id_;
  });
}

void FleetControls::take_triggers(const std::vector<TakenTrigger>& triggers,
                                    const std::unordered_set<std::string>& returned) {
  for (const auto& taken : triggers) {
    // Once stop() began, a trigger is left in the store for a replica that
    // stays (a taken one could only be cancelled here); so it is while this
    // replica's settings are not the fleet's.
    if (stopping_ || !host_.settings_refusal().empty()) return;
    const ControlChange change = state_->take_trigger(taken.entry->identity.key, taken.trigger.id,
                                                                    host_.fleet_now(), replica_id_);
    const std::optional<bool> ours =
        change.status == ControlChange::Status::error ? taken_here(taken) : std::optional<bool>(true);
    if (!ours) {  // unknown: the controls unreadable too; looked at again at the next poll
      host_.log(LogLevel::warning, fmt::format("entry \"{}\": trigger {}: the take's answer was lost ({}) and the controls "
                                         "could not be read; looked at again at the next poll",
                                         taken.entry->identity.key, taken.trigger.id, change.error));
      takes_unanswered_.push_back(taken);
      continue;
    }
    if (!*ours) {
      host_.log(LogLevel::warning, fmt::format("entry \"{}\": trigger {} not taken: {}", taken.entry->identity.key,
                                         taken.trigger.id, change.error));
      continue;
    }
    if (change.status == ControlChange::Status::error) {
      host_.log(LogLevel::info, fmt::format("entry \"{}\": trigger {}: the take's answer was lost ({}), but the "
                                      "controls name this replica as its taker",
                                      taken.entry->identity.key, taken.trigger.id, change.error));
    } else if (change.status != ControlChange::Status::changed) {
      continue;  // another replica took it
    }
    if (returned.contains(taken.trigger.id)) {
      host_.log(LogLevel::warning,
          fmt::format("entry \"{}\": trigger {} by {} came back after it was taken (its request sent again, or "
                      "the store went back: a restart from a snapshot, a lagging failover); dropped, not run again",
                      taken.entry->identity.key, taken.trigger.id, taken.trigger.requested_by));
      continue;
    }
    run_taken(taken);
  }
}

void FleetControls::run_taken(const TakenTrigger& taken) {
  host_.log(LogLevel::info, fmt::format("entry \"{}\": trigger {} by {} taken, running it here", taken.entry->identity.key,
                                  taken.trigger.id, taken.trigger.requested_by));
  const std::string not_queued = host_.queue_manual(taken.entry, taken.trigger.requested_at);
  if (!not_queued.empty()) {
    host_.log(LogLevel::warning, fmt::format("entry \"{}\": trigger {} taken but not run: {}",
                                             taken.entry->identity.key, taken.trigger.id, not_queued));
  }
}

}  // namespace fleetcron::detail
