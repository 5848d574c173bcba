// The workers: from a queued fire to a finished run — jitter, elector,
// claimer, the job with retries — plus the timeout watchdog and stop().
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iterator>
#include <stdexcept>

#include "core/scheduler_impl.h"
#include "fleetcron/duration.h"

namespace fleetcron {

using detail::Decision;
using detail::Entry;
using detail::Fire;
using detail::Run;

namespace {

// Marks the threads that run jobs, so stop() called from a job does not
// wait for (or join) its own thread.
thread_local const void* current_worker_of = nullptr;

std::string describe_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "non-standard exception";
  }
}

// Why a fire this old must not be claimed; empty if it may be.
std::string staleness(Instant now, Instant scheduled_at, const Claimer& claimer) {
  const auto age = now - scheduled_at;
  const auto window = claimer.dedup_window();
  if (age <= window) return {};
  return fmt::format("the fire is {} old, beyond the claimer's dedup window of {}: another replica's claim on it may have "
                     "expired, so claiming it could run it twice",
                     format_duration(age), format_duration(window));
}

/// An entry's overlap slot, held from the overlap check to the end of the
/// run: releasing it lets a queued fire of the entry go on.
class OverlapSlot {
 public:
  OverlapSlot() = default;
  OverlapSlot(const OverlapSlot&) = delete;
  OverlapSlot& operator=(const OverlapSlot&) = delete;
  ~OverlapSlot() { release(); }
  void hold(Entry& entry) { entry_ = &entry; }
  void release() {
    if (entry_ == nullptr) return;
    {
      std::lock_guard guard(entry_->overlap_mutex);
      --entry_->active;
    }
    entry_->overlap_cv.notify_all();
    entry_ = nullptr;
  }

 private:
  Entry* entry_ = nullptr;
};

SkipReason skip_reason_of(ClaimResult::Status status) {
  switch (status) {
    case ClaimResult::Status::already_claimed: return SkipReason::already_claimed;
    case ClaimResult::Status::clock_skew: return SkipReason::clock_skew;
    case ClaimResult::Status::store_reset: return SkipReason::store_reset;
    case ClaimResult::Status::claimed:  // not a skip; callers do not ask
    case ClaimResult::Status::error: break;
  }
  return SkipReason::claim_error;
}

}  // namespace

bool Scheduler::Impl::enqueue(std::vector<Fire>& fires) {
  if (fires.empty()) return false;
  std::vector<Fire> rejected;
  std::size_t queued = 0, running = 0, added = 0;
  bool stopping = false;
  {
    std::lock_guard guard(queue_mutex_);
    stopping = workers_exit_;
    for (auto& fire : fires) {
      if (stopping || queue_.size() >= options_.max_queued) {
        rejected.push_back(std::move(fire));
      } else {
        queue_.push_back(std::move(fire));
        ++added;
      }
    }
    queued = queue_.size();
    running = running_count_;
  }
  fires.clear();
  // One worker per new fire, not all of them: a woken worker takes a claim
  // batch, and waking every idle worker for each enqueue is a herd.
  for (std::size_t i = 0; i < std::min(added, workers_.size()); ++i) queue_cv_.notify_one();
  for (auto& fire : rejected) {
    if (stopping) {
      publish(CancelledFireEvent{Entry::ref(fire.entry), fire.scheduled_at, "scheduler stopped",
                                 CancelReason::scheduler_stopped, claimed(fire)});
    } else {
      log(LogLevel::warning, fmt::format("entry {} \"{}\": fire rejected, the run queue is full ({} fires)",
                                         fire.entry->identity.id, fire.entry->identity.name, options_.max_queued));
      publish(RejectedFireEvent{Entry::ref(fire.entry), fire.scheduled_at, fire.manual});
    }
    fires.push_back(std::move(fire));  // callers learn what did not fit
  }
  if (events_.active()) publish(QueueDepthEvent{queued, running});
  return stopping;
}

bool Scheduler::Impl::can_take_locked() const {
  if (queue_.empty()) return false;
  // A decided fire brings the worker reserved for it; any other needs one
  // that no claim batch has reserved.
  return queue_.front().reserved || committed_ < workers_.size();
}

void Scheduler::Impl::worker_main() {
  current_worker_of = this;
  std::vector<Fire> batch;
  std::unique_lock lock(queue_mutex_);
  while (true) {
    // A worker holding a claim batch will put fires back: wait for them.
    queue_cv_.wait(lock, [this] { return (workers_exit_ && held_ == 0 && queue_.empty()) || can_take_locked(); });
    if (queue_.empty()) return;  // told to exit and nothing left (drain) or queue cleared (stop)
    Fire fire = std::move(queue_.front());
    queue_.pop_front();
    ++running_count_;
    if (!fire.reserved) ++committed_;  // this worker; a decided fire's reservation passes to it
    fire.reserved = false;
    if (batchable(fire) && !stale_now(fire)) take_batch(fire, batch);
    held_ += batch.size();
    lock.unlock();
    bool own_runs = true;
    if (!batch.empty()) {
      // Fires due together share one claim round trip: this worker runs
      // the first, the others go back to the front of the queue, decided,
      // each with the worker take_batch() reserved for it.
      batch.insert(batch.begin(), std::move(fire));
      const std::size_t taken = batch.size();
      own_runs = decide_batch(batch);
      if (own_runs) {
        fire = std::move(batch.front());
        batch.erase(batch.begin());
      }
      for (auto& decided : batch) decided.reserved = true;
      {
        std::lock_guard guard(queue_mutex_);
        held_ -= taken - 1;  // back in the queue, or skipped (their reservations are released)
        if (!own_runs) --committed_;
        queue_.insert(queue_.begin(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
      }
      queue_cv_.notify_all();
      batch.clear();
    }
    if (own_runs) execute(fire);
    lock.lock();
    if (own_runs) --committed_;
    --running_count_;
    if (!queue_.empty()) queue_cv_.notify_one();  // a fire may have waited for a free worker
    idle_cv_.notify_all();
  }
}

bool Scheduler::Impl::batchable(const Fire& fire) {
  const auto& settings = *fire.entry->settings;
  // Overlap is decided before the claim, in execute(), fire by fire.
  return !fire.manual && !fire.batched && !fire.decided && settings.claimer &&
         settings.jitter <= std::chrono::nanoseconds::zero() && settings.overlap == OverlapPolicy::allow;
}

Scheduler::Impl::OverlapCheck Scheduler::Impl::enter_overlap(Entry& entry, std::stop_token stop) {
  std::unique_lock lock(entry.overlap_mutex);
  if (entry.active == 0) {
    ++entry.active;
    return OverlapCheck::entered;
  }
  if (entry.settings->overlap == OverlapPolicy::skip || entry.waiting) return OverlapCheck::skip;
  entry.waiting = true;  // queue: this fire waits, unclaimed, holding its worker
  entry.overlap_cv.wait(lock, stop, [&] { return entry.active == 0; });
  entry.waiting = false;
  if (stop.stop_requested()) return OverlapCheck::stopped;
  ++entry.active;
  return OverlapCheck::entered;
}

bool Scheduler::Impl::claimed(const Fire& fire) {
  return !fire.manual && fire.decided.has_value() && fire.entry->settings->claimer != nullptr;
}

void Scheduler::Impl::take_batch(const Fire& first, std::vector<Fire>& batch) {
  // Only the front run of the queue: fires due at one instant are queued
  // together, and taking from the middle would cost a scan per worker.
  // Only as many as there are workers neither busy nor reserved by another
  // batch, and each taken fire reserves one (committed_): a claimed fire
  // must start at once, not wait in the queue behind jobs, where its claim
  // could expire, or be lost for the whole fleet if this process stops.
  const std::size_t free_workers = workers_.size() - std::min(workers_.size(), committed_);
  const std::size_t limit = std::min(claim_batch_limit - 1, free_workers);
  // A fire already too old to claim is left to a worker of its own, which
  // skips it at once: it must not hold a reserved worker.
  while (!queue_.empty() && batch.size() < limit) {
    Fire& next = queue_.front();
    if (!batchable(next) || next.entry->settings->claimer != first.entry->settings->claimer || stale_now(next)) break;
    batch.push_back(std::move(next));
    queue_.pop_front();
  }
  committed_ += batch.size();
}

bool Scheduler::Impl::stale_now(const Fire& fire) const {
  const auto& claimer = fire.entry->settings->claimer;
  return claimer && !staleness(clock_->now(), fire.scheduled_at, *claimer).empty();
}

void Scheduler::Impl::release_reservations(std::size_t count) {
  if (count == 0) return;
  {
    std::lock_guard guard(queue_mutex_);
    committed_ -= count;
  }
  queue_cv_.notify_all();  // the freed workers may take other fires
}

bool Scheduler::Impl::decide_batch(std::vector<Fire>& batch) {
  // One elector answer for the whole batch: the fires are due together,
  // and a round trip per fire would multiply an outage's timeouts.
  Verdict verdict = elect();
  if (verdict.decision.leader_gated) {  // lost since: refuse before claiming, not after
    std::lock_guard guard(runs_mutex_);
    if (term_lost_locked(verdict.decision.term)) {
      verdict.skip = SkipReason::not_leader;
      verdict.error = fmt::format("leadership of term {} was lost", verdict.decision.term);
    }
  }
  std::vector<bool> keep(batch.size(), true);
  std::vector<std::size_t> claiming;  // indexes into batch
  std::vector<std::string> keys;
  const Instant now = clock_->now();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Fire& fire = batch[i];
    fire.batched = true;
    // A removed or paused entry's fire is left undecided: its run cancels it.
    if (fire.entry->removed.load() || fire.entry->paused.load()) continue;
    std::string key = fleetcron::fire_key(fire.entry->identity.key, fire.scheduled_at);
    std::optional<SkipReason> skip = verdict.skip;
    std::string error = verdict.error;
    if (!skip) {
      error = staleness(now, fire.scheduled_at, *fire.entry->settings->claimer);
      if (!error.empty()) skip = SkipReason::stale;
    }
    if (skip) {
      report_skip(Entry::ref(fire.entry), key, fire.scheduled_at, *skip, std::move(error));
      keep[i] = false;
      continue;
    }
    fire.decided = verdict.decision;
    keys.push_back(std::move(key));
    claiming.push_back(i);
  }
  // This worker runs the first fire still wanted (batch[0]), the others
  // keep one reserved worker each. Reservations beyond them are released
  // before the round trip (the workers they hold could run other fires),
  // and again after it.
  const auto reservations_needed = [&] {
    const auto wanted = static_cast<std::size_t>(std::count(keep.begin(), keep.end(), true));
    return wanted == 0 ? 0 : wanted - 1;
  };
  const auto first_wanted = [&] {
    const auto it = std::find(keep.begin(), keep.end(), true);
    if (it == keep.begin() || it == keep.end()) return;
    const auto at = static_cast<std::size_t>(it - keep.begin());
    std::swap(batch.front(), batch[at]);
    keep[at] = false;
    keep.front() = true;
    for (auto& index : claiming) {
      if (index == at) index = 0;
    }
  };
  bool stopping = false;
  {
    std::lock_guard guard(runs_mutex_);
    stopping = runs_stopping_;
  }
  if (stopping) {
    // stop() came while this batch was out of the queue: claiming now would
    // take fires from the other replicas only to cancel them here. Left
    // undecided, each is cancelled (unclaimed) by its run.
    for (const std::size_t index : claiming) batch[index].decided.reset();
    claiming.clear();
    keys.clear();
  }
  first_wanted();
  std::size_t reserved = batch.size() - 1;
  release_reservations(reserved - reservations_needed());
  reserved = reservations_needed();
  if (!claiming.empty()) claim_decided(batch, claiming, keys, keep);
  first_wanted();
  release_reservations(reserved - reservations_needed());
  const bool own_runs = keep.front();
  std::size_t out = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (keep[i]) batch[out++] = std::move(batch[i]);
  }
  batch.resize(out);
  return own_runs;
}

void Scheduler::Impl::claim_decided(std::vector<Fire>& batch, const std::vector<std::size_t>& claiming,
                                    std::vector<std::string>& keys, std::vector<bool>& keep) {
  const auto& claimer = batch[claiming.front()].entry->settings->claimer;
  std::vector<ClaimResult> results;
  try {
    results = claimer->claim_batch(keys);
    if (results.size() != keys.size()) {
      throw std::runtime_error(fmt::format("claim_batch returned {} results for {} fire keys", results.size(),
                                           keys.size()));
    }
  } catch (...) {
    results.assign(keys.size(), ClaimResult::failed(describe_exception(std::current_exception())));
  }
  const Instant answered = clock_->now();
  for (std::size_t k = 0; k < claiming.size(); ++k) {
    Fire& fire = batch[claiming[k]];
    ClaimResult& claim = results[k];
    if (fire.decided->leader_gated) note_leader_claim(claim);
    if (claim.status == ClaimResult::Status::claimed) {
      // Checked again on the answer: a claim written after the window
      // (a slow store, a pause between the check and the request) may
      // sit beside an expired one. The fire is lost, never run twice.
      if (std::string stale = staleness(answered, fire.scheduled_at, *claimer); !stale.empty()) {
        report_skip(Entry::ref(fire.entry), keys[k], fire.scheduled_at, SkipReason::stale, "claimed, but " + stale);
        keep[claiming[k]] = false;
        continue;
      }
      fire.decided->fence = claim.fence;
      continue;
    }
    report_skip(Entry::ref(fire.entry), keys[k], fire.scheduled_at, skip_reason_of(claim.status), std::move(claim.error));
    keep[claiming[k]] = false;
  }
}

Scheduler::Impl::Verdict Scheduler::Impl::elect() {
  Verdict verdict;
  if (!options_.elector) return verdict;
  // Stepped down after failing claims: not leading here, whatever an
  // elector without a background renewer would answer.
  if (clock_->steady_now().time_since_epoch().count() < stepped_down_until_.load(std::memory_order_relaxed)) {
    verdict.skip = SkipReason::not_leader;
    return verdict;
  }
  Leadership leadership;
  try {
    leadership = options_.elector->is_leader();
  } catch (...) {
    leadership = Leadership::failed(describe_exception(std::current_exception()));
  }
  switch (leadership.status) {
    case Leadership::Status::error:
      verdict.skip = SkipReason::election_error;
      verdict.error = std::move(leadership.error);
      break;
    case Leadership::Status::follower:
      verdict.skip = SkipReason::not_leader;
      break;
    case Leadership::Status::leader:
      verdict.decision = {true, leadership.term, leadership.term};
      break;
  }
  return verdict;
}

std::string Scheduler::Impl::leadership_changed(const Decision& decided) {
  if (!decided.leader_gated) return {};
  const Verdict now = elect();
  if (now.skip) {
    return fmt::format("leader of term {} at the scheduled instant, not after the jitter ({}{}{})", decided.term,
                       to_string(*now.skip), now.error.empty() ? "" : ": ", now.error);
  }
  if (now.decision.term != decided.term) {
    return fmt::format("the leadership term changed during the jitter ({} to {})", decided.term, now.decision.term);
  }
  return {};
}

void Scheduler::Impl::report_skip(const EntryRef& ref, const std::string& fire_key, Instant scheduled_at,
                                  SkipReason reason, std::string error) {
  if (!error.empty()) {
    log(LogLevel::warning, fmt::format("fire {} skipped ({}): {}", fire_key, to_string(reason), error));
  }
  publish(SkippedFireEvent{ref, fire_key, scheduled_at, reason, std::move(error)});
}

bool Scheduler::Impl::sleep_for(std::chrono::nanoseconds duration, std::stop_token stop) {
  if (duration <= std::chrono::nanoseconds::zero()) return !stop.stop_requested();
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;
  std::stop_callback on_stop(stop, [&] {
    std::lock_guard guard(mutex);
    stopped = true;
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  const auto deadline = clock_->steady_now() + duration;
  while (!stopped && clock_->steady_now() < deadline) clock_->wait_until(cv, lock, deadline);
  return !stopped;
}

std::chrono::nanoseconds Scheduler::Impl::random_below(std::chrono::nanoseconds bound) {
  if (bound <= std::chrono::nanoseconds::zero()) return std::chrono::nanoseconds::zero();
  std::lock_guard guard(random_mutex_);
  std::uniform_int_distribution<std::int64_t> pick(0, bound.count() - 1);
  return std::chrono::nanoseconds{pick(random_)};
}

std::chrono::nanoseconds Scheduler::Impl::retry_delay(const RetryPolicy& retry, int failed_attempts) {
  double delay = static_cast<double>(retry.initial_delay.count()) * std::pow(retry.multiplier, failed_attempts - 1);
  delay = std::min(delay, static_cast<double>(retry.max_delay.count()));
  if (retry.jitter_fraction > 0) {
    std::lock_guard guard(random_mutex_);
    std::uniform_real_distribution<double> spread(-retry.jitter_fraction, retry.jitter_fraction);
    delay += delay * spread(random_);
  }
  return std::chrono::nanoseconds{static_cast<std::int64_t>(std::max(0.0, delay))};
}

void Scheduler::Impl::request_stop_where(const std::function<bool(const Run&)>& match, bool mark_timed_out) {
  std::vector<std::shared_ptr<Run>> matched;
  {
    std::lock_guard guard(runs_mutex_);
    for (const auto& [id, run] : runs_) {
      if (match(*run)) matched.push_back(run);
    }
  }
  // Outside the lock: request_stop() runs the jobs' stop callbacks.
  for (const auto& run : matched) {
    if (mark_timed_out) run->timed_out.store(true);
    run->stop.request_stop();
  }
}

void Scheduler::Impl::on_leadership_lost(std::uint64_t term) {
  log(LogLevel::warning, fmt::format("leadership of term {} lost", term));
  {
    std::lock_guard guard(runs_mutex_);
    if (!term_lost_locked(term)) {
      if (lost_terms_.size() == max_lost_terms) lost_terms_.pop_front();
      lost_terms_.push_back(term);
    }
  }
  if (options_.on_leadership_lost != LeadershipLossPolicy::cancel) return;
  request_stop_where([term](const Run& run) { return run.leader_gated && run.term <= term; }, false);
}

void Scheduler::Impl::note_leader_claim(const ClaimResult& claim) {
  const bool failed = claim.status == ClaimResult::Status::error || claim.status == ClaimResult::Status::clock_skew;
  if (!failed) {
    claims_failing_since_.store(0, std::memory_order_relaxed);
    return;
  }
  const auto now = clock_->steady_now().time_since_epoch().count();
  // While stepped down, failures in flight from before do not count: the
  // next window starts with the first failure after the hold.
  if (now < stepped_down_until_.load(std::memory_order_relaxed)) return;
  // Failures must be continuous: one older than the bound (a transient
  // error an hour ago) starts a new window instead of extending the old one.
  const auto previous = claims_last_failure_.exchange(now, std::memory_order_relaxed);
  if (previous != 0 && now - previous > claim_failure_step_down.count()) {
    claims_failing_since_.store(now, std::memory_order_relaxed);
    return;
  }
  Clock::SteadyTime::rep since = 0;
  if (claims_failing_since_.compare_exchange_strong(since, now, std::memory_order_relaxed)) return;  // the first
  const std::chrono::nanoseconds failing_for{now - since};
  if (failing_for < claim_failure_step_down || now < stepped_down_until_.load(std::memory_order_relaxed)) return;
  if (!claims_failing_since_.compare_exchange_strong(since, 0, std::memory_order_relaxed)) return;  // another worker did
  stepped_down_until_.store(now + step_down_hold.count(), std::memory_order_relaxed);
  log(LogLevel::error, fmt::format("leading, but every claim failed for {} (last: {}): stepping down, out of the "
                                   "election for {}, so a replica that can claim leads",
                                   format_duration(failing_for), claim.error, format_duration(step_down_hold)));
  publish(LeadershipStepDownEvent{failing_for, step_down_hold, claim.error});
}

bool Scheduler::Impl::term_lost_locked(std::uint64_t term) const {
  return std::find(lost_terms_.begin(), lost_terms_.end(), term) != lost_terms_.end();
}

void Scheduler::Impl::watchdog_main() {
  std::unique_lock lock(runs_mutex_);
  while (!watchdog_exit_) {
    const auto now = clock_->steady_now();
    if (!timeouts_.empty() && timeouts_.begin()->first <= now) {
      const std::uint64_t run_id = timeouts_.begin()->second;
      timeouts_.erase(timeouts_.begin());
      auto it = runs_.find(run_id);
      if (it == runs_.end()) continue;
      auto run = it->second;
      lock.unlock();
      run->timed_out.store(true);
      run->stop.request_stop();
      lock.lock();
      continue;
    }
    const auto deadline = timeouts_.empty() ? now + std::chrono::seconds{1} : timeouts_.begin()->first;
    clock_->wait_until(watchdog_cv_, lock, deadline);
  }
}

// Automatic fires: jitter, then elector, then claimer, then the job; any
// backend error skips the fire (fail closed). Manual fires: the job only.
void Scheduler::Impl::execute(Fire& fire) {
  const auto& entry = fire.entry;
  const EntryRef ref = Entry::ref(entry);
  const auto& settings = *entry->settings;
  auto finish = [&](RunOutcome outcome) {
    if (fire.outcome) fire.outcome->set(std::move(outcome));
  };
  // Register first, then look at the flags: remove() and stop() set theirs
  // before scanning the runs, so a run is either found by the scan or sees
  // the flag here — never neither.
  auto run = std::make_shared<Run>();
  run->entry_id = entry->identity.id;
  std::uint64_t run_id = 0;
  bool stopping = false;
  {
    std::lock_guard guard(runs_mutex_);
    run_id = next_run_id_++;
    runs_.emplace(run_id, run);
    stopping = runs_stopping_;
  }
  std::optional<Clock::SteadyTime> timeout_at;  // set when a timeout was registered
  auto unregister = [&] {
    std::lock_guard guard(runs_mutex_);
    runs_.erase(run_id);
    if (!timeout_at) return;  // the common case: nothing to search
    // The watchdog may already have removed it (the timeout fired).
    auto [first, last] = timeouts_.equal_range(*timeout_at);
    for (auto it = first; it != last; ++it) {
      if (it->second == run_id) {
        timeouts_.erase(it);
        break;
      }
    }
  };
  bool fire_claimed = claimed(fire);  // a claim batch granted it, or the claim below does
  auto cancel = [&](std::string cause, CancelReason reason) {
    publish(CancelledFireEvent{ref, fire.scheduled_at, cause, reason, fire_claimed});
    unregister();
    finish({RunStatus::cancelled, 0, std::move(cause)});
  };
  if (stopping) return cancel("scheduler stopped", CancelReason::scheduler_stopped);
  if (entry->removed.load()) return cancel("entry removed", CancelReason::entry_removed);
  if (!fire.manual && entry->paused.load()) return cancel("entry paused", CancelReason::entry_paused);
  FireContext context{ref, fire_key(entry->identity.key, fire.scheduled_at), fire.scheduled_at, 1, 0, fire.manual};
  OverlapSlot overlap;  // held until the run ends
  if (fire.manual && settings.overlap != OverlapPolicy::allow) {  // runs regardless, and counts as running
    {
      std::lock_guard guard(entry->overlap_mutex);
      ++entry->active;
    }
    overlap.hold(*entry);
  }

  if (!fire.manual) {
    auto skip = [&](SkipReason reason, std::string error) {
      report_skip(ref, context.fire_key, fire.scheduled_at, reason, std::move(error));
      unregister();
    };
    Decision decision;
    if (fire.decided) {
      decision = *fire.decided;  // a claim batch asked the elector and the claimer
      // Its worker was reserved, so it starts at once; should it still be
      // older than the window here (a pause), it is lost, not run twice.
      if (std::string stale = staleness(clock_->now(), fire.scheduled_at, *settings.claimer); !stale.empty()) {
        return skip(SkipReason::stale, "claimed, but it could not start in time: " + stale);
      }
    } else {
      // Leadership is decided at the scheduled instant, not after this
      // replica's own jitter (a handover inside the jitter window would run
      // the fire twice or never), and must hold with the same term after it.
      Verdict verdict = elect();
      if (verdict.skip) return skip(*verdict.skip, std::move(verdict.error));
      decision = verdict.decision;
      if (settings.jitter > std::chrono::nanoseconds::zero()) {
        if (!sleep_for(random_below(settings.jitter), run->stop.get_token())) {
          return cancel("stopped during jitter", CancelReason::stopped_before_start);
        }
        if (std::string changed = leadership_changed(decision); !changed.empty()) {
          return skip(SkipReason::not_leader, std::move(changed));
        }
      }
    }
    if (decision.leader_gated) {
      bool term_lost = false;
      {
        std::lock_guard guard(runs_mutex_);
        run->leader_gated = true;
        run->term = decision.term;
        term_lost = term_lost_locked(decision.term);  // lost between is_leader() and here
      }
      if (term_lost) {
        return skip(SkipReason::not_leader, fmt::format("leadership of term {} was lost", decision.term));
      }
    }
    if (settings.overlap != OverlapPolicy::allow) {  // before the claim: a replica that will not run it leaves it to the others
      switch (enter_overlap(*entry, run->stop.get_token())) {
        case OverlapCheck::skip: return skip(SkipReason::overlap, "the previous run is still going");
        case OverlapCheck::stopped:
          return cancel("stopped while waiting for the previous run", CancelReason::stopped_before_start);
        case OverlapCheck::entered: overlap.hold(*entry); break;
      }
    }
    if (!fire.decided && settings.claimer) {
      if (run->stop.stop_requested()) return cancel("stopped before the claim", CancelReason::stopped_before_start);
      if (std::string stale = staleness(clock_->now(), fire.scheduled_at, *settings.claimer); !stale.empty()) {
        return skip(SkipReason::stale, std::move(stale));
      }
      ClaimResult claim;
      try {
        claim = settings.claimer->claim(context.fire_key);
      } catch (...) {
        claim = ClaimResult::failed(describe_exception(std::current_exception()));
      }
      if (decision.leader_gated) note_leader_claim(claim);
      if (claim.status != ClaimResult::Status::claimed) return skip(skip_reason_of(claim.status), std::move(claim.error));
      if (std::string stale = staleness(clock_->now(), fire.scheduled_at, *settings.claimer); !stale.empty()) {
        return skip(SkipReason::stale, "claimed, but " + stale);  // see decide_batch()
      }
      decision.fence = claim.fence;
      fire_claimed = true;
    }
    context.fence = decision.fence;
    if (run->stop.stop_requested()) return cancel("stopped before the job started", CancelReason::stopped_before_start);
  }

  const auto started = clock_->steady_now();
  if (settings.timeout > std::chrono::nanoseconds::zero()) {
    {
      std::lock_guard guard(runs_mutex_);
      timeout_at = started + settings.timeout;
      timeouts_.emplace(*timeout_at, run_id);
    }
    watchdog_cv_.notify_one();
  }
  RunOutcome outcome;
  const int max_attempts = settings.retry ? settings.retry->max_retries + 1 : 1;
  for (int attempt = 1;; ++attempt) {
    context.attempt = attempt;
    outcome.attempts = attempt;
    if (events_.active()) {
      publish(JobStartedEvent{ref, context.fire_key, fire.scheduled_at, clock_->now(), attempt, context.fence, fire.manual});
    }
    std::exception_ptr error;
    try {
      entry->job(context, run->stop.get_token());
    } catch (...) {
      error = std::current_exception();
    }
    outcome.error = error ? describe_exception(error) : std::string();
    outcome.status = error ? RunStatus::failed : RunStatus::succeeded;
    if (run->stop.stop_requested()) {
      // Stop was requested while it ran: however it returned, it did not
      // run to its natural end.
      outcome.status = run->timed_out.load() ? RunStatus::timed_out : RunStatus::cancelled;
      if (outcome.error.empty()) outcome.error = run->timed_out.load() ? "timeout" : "stop requested";
      break;
    }
    if (!error) break;
    if (attempt >= max_attempts) break;
    if (!sleep_for(retry_delay(*settings.retry, attempt), run->stop.get_token())) {
      outcome.status = run->timed_out.load() ? RunStatus::timed_out : RunStatus::cancelled;
      break;
    }
  }
  const auto duration = clock_->steady_now() - started;
  unregister();
  if (outcome.status != RunStatus::succeeded) {
    log(LogLevel::warning, fmt::format("fire {} {} after {} attempt(s): {}", context.fire_key, to_string(outcome.status),
                                       outcome.attempts, outcome.error));
  }
  if (!fire.manual) {
    const auto at = fire.scheduled_at.time_since_epoch().count();
    auto seen = entry->prev.load(std::memory_order_relaxed);
    while (seen < at && !entry->prev.compare_exchange_weak(seen, at, std::memory_order_relaxed)) {
    }
  }
  if (events_.active()) {
    publish(JobCompletedEvent{ref, context.fire_key, fire.scheduled_at, duration, outcome.status, outcome.attempts,
                              outcome.error, fire.manual});
  }
  finish(std::move(outcome));
}

bool Scheduler::Impl::stop(Clock::SteadyTime deadline, bool drain_first) {
  {
    std::unique_lock guard(mutex_);
    if (state_ == State::created) {
      state_ = State::stopped;
      guard.unlock();  // an observer may call back into us while we flush
      events_.flush_and_stop();
      return true;
    }
    if (state_ == State::running) state_ = State::stopping;
  }
  loop_cv_.notify_all();
  {
    std::lock_guard guard(join_mutex_);
    if (loop_thread_.joinable() && loop_thread_.get_id() != std::this_thread::get_id()) loop_thread_.join();
  }
  // No new fires from here on: free the lease now, so another replica
  // leads within its next check instead of after the runs (and a drain's
  // grace) end. Running leader-gated jobs keep their fence.
  resign_once();

  const bool on_worker = current_worker_of == this;
  const std::size_t self = on_worker ? 1 : 0;
  auto finished = [&] { return queue_.empty() && held_ == 0 && running_count_ <= self; };
  std::unique_lock lock(queue_mutex_);
  workers_exit_ = true;  // no new fires; workers leave once the queue is empty
  queue_cv_.notify_all();
  if (drain_first) {
    while (!finished() && clock_->steady_now() < deadline) clock_->wait_until(idle_cv_, lock, deadline);
  }
  // Stop: cancel what is still queued, then ask running jobs to stop.
  std::deque<Fire> cancelled;
  cancelled.swap(queue_);
  for (const auto& fire : cancelled) {
    if (fire.reserved) --committed_;
  }
  lock.unlock();
  for (auto& fire : cancelled) {
    publish(CancelledFireEvent{Entry::ref(fire.entry), fire.scheduled_at, "scheduler stopped",
                               CancelReason::scheduler_stopped, claimed(fire)});
    if (fire.outcome) fire.outcome->set(RunOutcome{RunStatus::cancelled, 0, "scheduler stopped"});
  }
  {
    std::lock_guard guard(runs_mutex_);
    runs_stopping_ = true;  // runs registering from now on stop at once
  }
  request_stop_where([](const Run&) { return true; }, false);
  lock.lock();
  while (!finished() && clock_->steady_now() < deadline) clock_->wait_until(idle_cv_, lock, deadline);
  const bool all_finished = finished();
  lock.unlock();
  if (!all_finished || on_worker) return all_finished;
  join_threads_once();
  return true;
}

void Scheduler::Impl::join_threads_once() {
  std::lock_guard join_guard(join_mutex_);  // a second stopper waits here, then finds joined_
  if (joined_) return;
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  {
    std::lock_guard guard(runs_mutex_);
    watchdog_exit_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  if (loop_thread_.joinable()) loop_thread_.join();
  resign_once();
  events_.flush_and_stop();
  joined_ = true;
  std::lock_guard guard(mutex_);
  state_ = State::stopped;
}

void Scheduler::Impl::resign_once() {
  if (!options_.elector || resigned_.exchange(true)) return;
  detach_elector();
  try {
    options_.elector->resign();  // hand over now rather than after the lease TTL
  } catch (...) {
    log(LogLevel::warning, "elector resign failed: " + describe_exception(std::current_exception()));
  }
}

void Scheduler::Impl::detach_elector() {
  {
    std::lock_guard hold(leadership_guard_->liveness_mutex);  // waits for a liveness check under way
    leadership_guard_->liveness_impl = nullptr;
  }
  {
    std::lock_guard hold(leadership_guard_->mutex);  // waits for a callback under way
    leadership_guard_->impl = nullptr;
  }
  if (!options_.elector) return;
  try {
    options_.elector->on_leadership_lost({});
  } catch (...) {
    log(LogLevel::warning, "elector rejected clearing its callback: " + describe_exception(std::current_exception()));
  }
}

}  // namespace fleetcron
