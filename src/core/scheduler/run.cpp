// Runs: from a worker's fire to its end — registration, the claim path of
// a fire not decided in a batch, the job with its retries and timeouts
// (watched by RunsInProgress), the events.
#include <fmt/format.h>


#include "fleetcron/duration.h"

#include "core/scheduler/scheduler_impl.h"
#include "core/support/assert.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;
using detail::FireState;
using detail::OverlapSlot;
using detail::Run;

void OverlapSlot::release() {
  if (state_ == nullptr) return;
  {
    std::lock_guard guard(state_->mutex);
    --state_->active;
  }
  state_->cv.notify_all();
  state_ = nullptr;
}

/// Lists a run in the replica registry while its job runs (with a registry),
/// and unlists it when it ends, however execute() returns.
class Scheduler::Impl::RunListing {
 public:
  RunListing(Impl& impl, Run& run, detail::WorkerSlot& slot, const FireContext& context,
             bool awaiting_fleet)
      : run_(impl.registry_on() ? &run : nullptr), slot_(slot) {
    if (run_ != nullptr) impl.note_running(run, slot, context, awaiting_fleet);
  }
  RunListing(const RunListing&) = delete;
  RunListing& operator=(const RunListing&) = delete;
  ~RunListing() { end(); }
  void end() {
    if (run_ == nullptr) return;
    std::lock_guard guard(slot_.mutex);
    run_->context = nullptr;
    run_ = nullptr;
  }

 private:
  Run* run_;
  detail::WorkerSlot& slot_;
};

/// Unregisters a run when it ends, however execute() returns.
class Scheduler::Impl::RunRegistration {
 public:
  RunRegistration(Impl& impl, Run& run, detail::WorkerSlot& slot) : impl_(impl), run_(run), slot_(slot) {}
  RunRegistration(const RunRegistration&) = delete;
  RunRegistration& operator=(const RunRegistration&) = delete;
  ~RunRegistration() { end(); }
  void end() {
    if (ended_) return;
    ended_ = true;
    impl_.runs_.unregister_run(run_, slot_);
  }

 private:
  Impl& impl_;
  Run& run_;
  detail::WorkerSlot& slot_;
  bool ended_ = false;
};

/// Queues a catch-up's next instant when this one ends, however it ends
/// (declared first in execute(): it runs after the overlap slot is released).
class Scheduler::Impl::NextInChain {
 public:
  NextInChain(Impl& impl, std::shared_ptr<std::deque<Fire>> rest) : impl_(impl), rest_(std::move(rest)) {}
  NextInChain(const NextInChain&) = delete;
  NextInChain& operator=(const NextInChain&) = delete;
  ~NextInChain() {
    if (!rest_ || rest_->empty()) return;
    std::vector<Fire> next;
    next.push_back(std::move(rest_->front()));
    rest_->pop_front();
    next.front().chain = std::move(rest_);
    impl_.enqueue(next);  // what does not fit is reported (rejected or cancelled)
  }

 private:
  Impl& impl_;
  std::shared_ptr<std::deque<Fire>> rest_;
};

void Scheduler::Impl::cancel_run(Fire& fire, RunRegistration& registration, std::string cause, CancelReason reason) {
  report_cancel(fire, cause, reason);
  registration.end();
  if (fire.outcome) fire.outcome->set({RunStatus::cancelled, 0, std::move(cause)});
}

void Scheduler::Impl::execute(Fire& fire, detail::WorkerSlot& slot) {
  Entry& entry = *fire.entry;
  const NextInChain next_in_chain(*this, std::move(fire.chain));
  Run run;
  run.entry_id = entry.identity.id;
  const bool stopping = runs_.register_run(run, slot);
  RunRegistration registration(*this, run, slot);
  if (stopping) return cancel_run(fire, registration, "scheduler stopped", CancelReason::scheduler_stopped);
  if (entry.removed.load()) return cancel_run(fire, registration, "entry removed", CancelReason::entry_removed);
  if (!fire.manual() && entry.paused.load()) {
    return cancel_run(fire, registration, "entry paused", CancelReason::entry_paused);
  }
  // The overlap slot is released after the completion is reported (a
  // waiting fire must not start first), when the event may have dropped the
  // last other reference to the entry that holds the slot's state.
  const std::shared_ptr<Entry> overlap_owner = entry.overlap ? fire.entry : nullptr;
  OverlapSlot overlap;  // held until the run ends
  if (fire.manual() && entry.overlap) {  // runs regardless, and counts as running
    {
      std::lock_guard guard(entry.overlap->mutex);
      ++entry.overlap->active;
    }
    overlap.hold(*entry.overlap);
  }
  if (!fire.manual()) {
    if (!decide(fire, run, slot, overlap)) return;
    if (run.stop.stop_requested()) {
      return cancel_run(fire, registration, "stopped before the job started", CancelReason::stopped_before_start);
    }
  }
  run_job(fire, run, slot, registration, overlap);
}

void Scheduler::Impl::run_job(Fire& fire, Run& run, detail::WorkerSlot& slot, RunRegistration& registration,
                              OverlapSlot& overlap) {
  // The context owns the entry from here (one reference count fewer to
  // touch per fire; the fire keeps it if a fleet-wide skip may report it).
  // `entry` stays valid while it does.
  Entry& entry = *fire.entry;
  // Only a trigger runs undecided; a recovery, and only it, carries its re-run number.
  FLEETCRON_ASSERT(fire.manual() || fire.state == FireState::granted);
  FLEETCRON_ASSERT((fire.kind == detail::FireKind::recovery) == (fire.recovery > 0));
  const bool alone = fleet_overlap_applies(fire);
  FireContext context{EntryRef(alone ? fire.entry : std::move(fire.entry), &entry.identity),
                      fire_key(entry.identity.key, fire.scheduled_at), fire.scheduled_at, 1, fire.grant.fence,
                      fire.manual()};
  RunDetails details;
  context.details = &details;
  context.recovered_fence = fire.recovered_fence;
  context.recovery = fire.recovery;
  RunListing listing(*this, run, slot, context, alone);
  if (alone && !enter_fleet_overlap(fire, run, slot, context)) return;
  if (alone && (run.stop.stop_requested() || entry.removed.load() || entry.paused.load())) {
    // It may have waited (overlap=queue): listed, it is unlisted at once.
    listing.end();
    membership_->announce_unlisted();
    if (entry.removed.load()) return cancel_run(fire, registration, "entry removed", CancelReason::entry_removed);
    if (entry.paused.load()) return cancel_run(fire, registration, "entry paused", CancelReason::entry_paused);
    return cancel_run(fire, registration, "stopped before the job started", CancelReason::stopped_before_start);
  }
  // The clock is read only for what needs it: the timeout and the
  // completion event's start and duration.
  const bool timed = entry.settings->timeout > std::chrono::nanoseconds::zero();
  const bool measured = timed || events_.active();
  const auto started = measured ? clock_->steady_now() : Clock::SteadyTime{};
  const Instant started_at = events_.active() ? clock_->now() : Instant{};
  if (timed) runs_.start_timeout(run, Run::Deadline::run, started + entry.settings->timeout);
  RunOutcome outcome = run_attempts(entry, run, context);
  const auto duration = measured ? clock_->steady_now() - started : std::chrono::nanoseconds::zero();
  registration.end();
  if (alone) {  // the fleet learns that the job is free before anyone learns that it ended
    listing.end();
    membership_->announce_unlisted();
  }
  finish_run(entry, fire, context, std::move(outcome), started_at, duration);
  overlap.release();
}

bool Scheduler::Impl::decide(Fire& fire, Run& run, detail::WorkerSlot& slot, OverlapSlot& overlap) {
  const auto& settings = *fire.entry->settings;
  if (fire.state == FireState::granted) {
    // Its worker was reserved, so it starts at once; should it still be
    // older than the window here (a pause), it is lost, not run twice.
    std::string stale = claims_->beyond_window(fire) ? std::string() : claims_->staleness_now(fire);
    if (!stale.empty()) {
      report_skip(fire, SkipReason::stale, "claimed, but it could not start in time: " + stale);
      return false;
    }
    if (!hold_term(fire, run, slot)) return false;
    // A batch's fires allow overlap, or skip fleet-wide (scheduler.cpp's add()).
    return pass_overlap(fire, run, overlap);
  }
  // Leadership is decided at the scheduled instant, not after this
  // replica's own jitter (a handover inside the jitter window would run the
  // fire twice or never), and must hold with the same term after it.
  detail::Election election = settings.leader_gated ? claims_->elect() : detail::Election{};
  if (election.refused) {
    note_unled(fire);
    report_skip(fire, *election.refused, std::move(election.error));
    return false;
  }
  if (settings.jitter > std::chrono::nanoseconds::zero()) {
    if (!sleep_for(random_.below(settings.jitter), run.stop.get_token())) {
      report_cancel(fire, "stopped during jitter", CancelReason::stopped_before_start);
      return false;
    }
    if (std::string changed = claims_->leadership_changed(election.grant); !changed.empty()) {
      note_unled(fire);
      report_skip(fire, SkipReason::not_leader, std::move(changed));
      return false;
    }
  }
  fire.grant = election.grant;
  if (!hold_term(fire, run, slot)) return false;
  // Before the claim: a replica that will not run it leaves it to the others.
  if (!pass_overlap(fire, run, overlap)) return false;
  if (settings.claimer && run.stop.stop_requested()) {
    report_cancel(fire, "stopped before the claim", CancelReason::stopped_before_start);
    return false;
  }
  const std::span<Fire> alone(&fire, 1);
  claims_->screen(alone, election);
  claims_->claim(alone);
  advance_cursors(alone);
  return fire.state == FireState::granted;
}

bool Scheduler::Impl::pass_overlap(Fire& fire, Run& run, OverlapSlot& overlap) {
  if (!fire.entry->overlap) return true;
  switch (enter_overlap(*fire.entry, run.stop.get_token())) {
    case OverlapCheck::skip: report_skip(fire, SkipReason::overlap, "the previous run is still going"); return false;
    case OverlapCheck::stopped:
      report_cancel(fire, "stopped while waiting for the previous run", CancelReason::stopped_before_start);
      return false;
    case OverlapCheck::entered:
      overlap.hold(*fire.entry->overlap);
      fire.overlap_held = &overlap;
      break;
  }
  return true;
}

bool Scheduler::Impl::hold_term(const Fire& fire, Run& run, detail::WorkerSlot& slot) {
  if (!fire.grant.leader_gated) return true;
  {
    std::lock_guard guard(slot.mutex);
    run.leader_gated = true;
    run.term = fire.grant.term;
  }
  // Then look (lost between is_leader() and here): on_leadership_lost()
  // records the term, then scans the slots, so it finds this run or we
  // find the term.
  if (!runs_.term_lost(fire.grant.term)) return true;
  note_unled(fire);
  report_skip(fire, SkipReason::not_leader, fmt::format("leadership of term {} was lost", fire.grant.term));
  return false;
}

Scheduler::Impl::OverlapCheck Scheduler::Impl::enter_overlap(const Entry& entry, std::stop_token stop) {
  auto& state = *entry.overlap;
  std::unique_lock lock(state.mutex);
  if (state.active == 0) {
    ++state.active;
    return OverlapCheck::entered;
  }
  if (entry.settings->overlap == OverlapPolicy::skip || state.waiting) return OverlapCheck::skip;
  state.waiting = true;  // queue: this fire waits, unclaimed, holding its worker
  state.cv.wait(lock, stop, [&] { return state.active == 0; });
  state.waiting = false;
  if (stop.stop_requested()) return OverlapCheck::stopped;
  ++state.active;
  return OverlapCheck::entered;
}

RunOutcome Scheduler::Impl::run_attempts(const Entry& entry, Run& run, FireContext& context) {
  const auto& settings = *entry.settings;
  const EntryRef& ref = context.entry;
  RunOutcome outcome;
  const int max_attempts = settings.retry ? settings.retry->max_retries + 1 : 1;
  for (int attempt = 1;; ++attempt) {
    context.attempt = attempt;
    *context.details = RunDetails{};  // what the last attempt tells, not an earlier one
    outcome.attempts = attempt;
    if (events_.active()) {
      publish(JobStartedEvent{ref, context.fire_key, context.scheduled_at, clock_->now(), attempt, context.fence,
                              context.manual, context.recovery});
    }
    const std::exception_ptr error = run_attempt(entry, run, context);
    outcome.error = error ? detail::describe_exception(error) : std::string();
    outcome.status = error ? RunStatus::failed : RunStatus::succeeded;
    if (run.stop.stop_requested()) {
      // Stop was requested while it ran: however it returned, it did not
      // run to its natural end.
      outcome.status = run.timed_out.load() ? RunStatus::timed_out : RunStatus::cancelled;
      if (outcome.error.empty()) outcome.error = run.timed_out.load() ? "timeout" : "stop requested";
      return outcome;
    }
    if (run.attempt_timed_out.load()) {
      outcome.status = RunStatus::timed_out;
      outcome.error = fmt::format("attempt timed out after {}{}{}", format_duration(settings.attempt_timeout),
                                  outcome.error.empty() ? "" : ": ", outcome.error);
    }
    if (outcome.status == RunStatus::succeeded || attempt >= max_attempts) return outcome;
    if (retries_paused(entry, context, outcome)) return outcome;
    const auto delay = random_.retry_delay(*settings.retry, attempt);
    if (options_.log_events) {
      log(LogLevel::warning, fmt::format("fire {} attempt {} {}: {}; retrying in {}", context.fire_key, attempt,
                                         to_string(outcome.status), outcome.error, format_duration(delay)));
    }
    publish(JobAttemptFailedEvent{ref, context.fire_key, context.scheduled_at, attempt, outcome.status, outcome.error,
                                  delay});
    if (!sleep_for(delay, run.stop.get_token())) {
      outcome.status = run.timed_out.load() ? RunStatus::timed_out : RunStatus::cancelled;
      return outcome;
    }
    if (retries_paused(entry, context, outcome)) return outcome;
  }
}

bool Scheduler::Impl::retries_paused(const Entry& entry, const FireContext& context, RunOutcome& outcome) {
  // A paused job runs no more attempts of a scheduled fire (a triggered
  // run, which a pause does not refuse, keeps its retries).
  if (context.manual || !entry.paused.load()) return false;
  outcome.error += "; its remaining retries were not run: the job was paused";
  if (options_.log_events) {
    log(LogLevel::warning, fmt::format("fire {} attempt {} {}: no retry, the job was paused", context.fire_key,
                                       outcome.attempts, to_string(outcome.status)));
  }
  return true;
}

std::exception_ptr Scheduler::Impl::run_attempt(const Entry& entry, Run& run, const FireContext& context) {
  const auto attempt_timeout = entry.settings->attempt_timeout;
  std::exception_ptr error;
  if (attempt_timeout <= std::chrono::nanoseconds::zero()) {
    try {
      entry.job(context, run.stop.get_token());
    } catch (...) {
      error = std::current_exception();
    }
    return error;
  }
  // The attempt's own stop source: its timeout stops this attempt only;
  // a stop of the run reaches it through the callback.
  run.attempt_timed_out.store(false);
  std::stop_source attempt;
  runs_.set_attempt_stop(run, attempt);
  runs_.start_timeout(run, Run::Deadline::attempt, clock_->steady_now() + attempt_timeout);
  {
    std::stop_callback forward(run.stop.get_token(), [&attempt] { attempt.request_stop(); });
    try {
      entry.job(context, attempt.get_token());
    } catch (...) {
      error = std::current_exception();
    }
  }
  runs_.end_timeout(run, Run::Deadline::attempt);
  return error;
}

bool Scheduler::Impl::pause_after_failure(const Entry& entry, const std::string& fire_key, const RunOutcome& outcome) {
  if (!entry.settings->pause_on_failure) return false;
  if (outcome.status != RunStatus::failed && outcome.status != RunStatus::timed_out) return false;
  // Not if removed meanwhile, or paused already (by an operator during its retries).
  if (change_paused(entry.identity.id, true) != true) return false;
  const std::string& key = entry.identity.key;
  const bool fleet_wide = controls_ != nullptr && !key.empty();
  log(LogLevel::warning,
      fmt::format("entry \"{}\": paused {}after its run {} {} (pause-on-failure): {}; resume it to run it again",
                  key.empty() ? std::to_string(entry.identity.id) : key,
                  fleet_wide ? "here, and the fleet-wide pause is being written, " : "", fire_key,
                  outcome.status == RunStatus::failed ? "failed" : "timed out", outcome.error));
  if (fleet_wide) {
    // Written by the controls' thread, woken for it; synchronously here
    // once the scheduler stops (that thread polls no more).
    if (controls_->request_pause(key, entry.identity.id, detail::pause_on_failure_author(options_.fleet.replica_id)) &&
        upkeep_) {
      upkeep_->poll_soon();
    }
  }
  return true;
}

void Scheduler::Impl::finish_run(Entry& entry, const Fire& fire, FireContext& context, RunOutcome outcome,
                                 Instant started_at, std::chrono::nanoseconds duration) {
  if (outcome.status != RunStatus::succeeded && options_.log_events) {
    log(LogLevel::warning, fmt::format("fire {} {} after {} attempt(s): {}", context.fire_key, to_string(outcome.status),
                                       outcome.attempts, outcome.error));
  }
  if (!fire.manual()) {
    auto& prev = entry.prev;
    const auto at = fire.scheduled_at.time_since_epoch().count();
    auto seen = prev.load(std::memory_order_relaxed);
    while (seen < at && !prev.compare_exchange_weak(seen, at, std::memory_order_relaxed)) {
    }
  }
  const bool paused = pause_after_failure(entry, context.fire_key, outcome);
  // The event may hold the last reference to the entry: `entry` is not
  // used after it.
  if (events_.active()) {
    publish(JobCompletedEvent{std::move(context.entry), std::move(context.fire_key), fire.scheduled_at, duration,
                              outcome.status, outcome.attempts, outcome.error, fire.manual(), started_at, context.fence,
                              std::move(*context.details), fire.recovery, paused});
  }
  if (fire.outcome) fire.outcome->set(std::move(outcome));
}

// ---- the registry's listing ------------------------------------------------

void Scheduler::Impl::note_running(Run& run, detail::WorkerSlot& slot, const FireContext& context,
                                   bool awaiting_fleet) {
  {
    std::lock_guard guard(slot.mutex);
    run.context = &context;
    run.started_at = clock_->now();
    run.awaiting_fleet = awaiting_fleet;
    run.alone = awaiting_fleet;
  }
  if (awaiting_fleet) return;  // enter_fleet_overlap() writes it
  // The upkeep thread lists it within a second.
  if (registry_on()) upkeep_->note_run_started();
}

// ---- waiting -----------------------------------------------------

bool Scheduler::Impl::sleep_for(std::chrono::nanoseconds duration, std::stop_token stop) {
  return fleetcron::sleep_for(*clock_, duration, std::move(stop));
}

}  // namespace fleetcron
