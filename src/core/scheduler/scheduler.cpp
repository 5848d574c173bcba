// The scheduler: its public face, the entries and the loop. Start and stop
// are in lifecycle.cpp, the workers in dispatch.cpp, the claim path in
// claim_path.cpp (ClaimPath), the runs in run.cpp.
#include "fleetcron/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/scheduler/missed_fires.h"
#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;
using detail::FireKind;

namespace {

constexpr std::size_t snapshot_batch = 1024;
constexpr std::size_t loop_batch = 64;

std::optional<Instant> optional_instant(Instant t) {
  if (t == Entry::no_instant) return std::nullopt;
  return t;
}

std::optional<Instant> optional_instant(const std::atomic<Instant::rep>& t) {
  return optional_instant(Instant{std::chrono::nanoseconds{t.load(std::memory_order_relaxed)}});
}

SchedulerOptions validated(SchedulerOptions options) {
  detail::validate(options);
  return options;
}

}  // namespace

Scheduler::Impl::Impl(SchedulerOptions options)
    : options_(validated(std::move(options))),
      clock_(options_.clock),
      store_clock_(options_.fleet.state ? std::make_unique<StoreClock>(*options_.fleet.state, options_.clock)
                                        : nullptr),
      ledger_(options_.fleet.state && options_.fleet.ledger
                  ? std::make_shared<detail::LedgerWriter>(options_.fleet.state, options_.fleet.replica_id,
                                                           options_.fleet.ledger_retention, options_.limits.ledger_queue,
                                                           options_.clock, options_.logger,
                                                           options_.fleet.ledger_gather_window)
                  : nullptr),
      events_(options_.observers, options_.recorder, ledger_, options_.limits.observer_queue, options_.logger),
      run_queue_(options_.limits.max_concurrent, options_.limits.max_queued, batch_rule()),
      runs_(options_.clock, options_.limits.max_concurrent),
      random_(options_.random_seed) {
  parse_options_.zone = options_.zone;
  parse_options_.seconds = options_.seconds_field ? SecondsField::optional : SecondsField::none;
  EntryOptions defaults;
  default_settings_ = detail::resolve(options_, defaults);
  claims_ = make_claim_path();
  controls_ = make_controls();
  membership_ = make_membership();
  // A `running` record waits until the registry lists its run: a runner
  // killed before that leaves no record its loss can never replace.
  if (ledger_ && membership_) ledger_->hold_running_until_listed(runs_read_marks_);
  if (controls_ || membership_) {
    upkeep_ = std::make_unique<detail::FleetUpkeep>(clock_, controls_.get(), options_.fleet.control_poll_interval,
                                                    membership_.get(), options_.fleet.registry_heartbeat_interval);
  }
  catch_up_queue_ = make_catch_up_queue();
}

Scheduler::Impl::~Impl() = default;

void Scheduler::Impl::publish(Event event) {
  if (events_.active()) events_.publish(std::move(event));
}

void Scheduler::Impl::log(LogLevel level, const std::string& message) const {
  try {
    options_.logger(level, message);
  } catch (...) {
    // A failing log sink must not take the scheduler down.
  }
}

bool Scheduler::Impl::coordinated(const EntryOptions& entry) const {
  if (entry.scope == EntryScope::replica) return false;
  const bool claims = entry.claimer ? *entry.claimer != nullptr : options_.claimer != nullptr;
  return claims || options_.elector != nullptr;
}

bool Scheduler::Impl::coordinated(EntryId id) const {
  std::lock_guard guard(mutex_);
  const auto it = entries_.find(id);
  return it != entries_.end() && (it->second->settings->claimer || it->second->settings->leader_gated);
}

SchedulePtr Scheduler::Impl::parse(std::string_view spec, const EntryOptions& entry) const {
  return parse(spec, entry.dst, coordinated(entry));
}

SchedulePtr Scheduler::Impl::parse(std::string_view spec, const std::optional<DstPolicy>& dst, bool coordinated) const {
  ParseOptions options = parse_options_;
  if (dst) options.dst = *dst;
  if (coordinated) options.every_anchor = EveryAnchor::epoch;  // the same instants on every replica
  return parse_schedule(spec, options);
}

// ---- entries --------------------------------------------------------

std::shared_ptr<const detail::EntrySettings> Scheduler::Impl::prepare(const SchedulePtr& schedule,
                                                                     EntryOptions& options) const {
  if (!schedule) throw std::invalid_argument("add: schedule is null");
  detail::check_entry_options(options);
  const bool inherits_everything = options.timeout == std::chrono::nanoseconds::zero() &&
                                   options.attempt_timeout == std::chrono::nanoseconds::zero() && !options.jitter &&
                                   !options.retry && !options.missed_fire && !options.claimer &&
                                   !options.catch_up_reach && !options.ledger_retention &&
                                   options.overlap == OverlapPolicy::allow && options.recover == RecoverPolicy::report &&
                                   options.recover_within == EntryOptions{}.recover_within &&
                                   options.recover_max == EntryOptions{}.recover_max &&
                                   options.scope == EntryScope::fleet && !options.pause_on_failure;
  auto settings = inherits_everything ? default_settings_ : detail::resolve(options_, options);
  if (settings->claimer && options.key.empty()) {
    throw SchedulerError(SchedulerError::Code::claimer_requires_key,
                         "add: an entry that uses a claimer needs a key (EntryOptions::key)");
  }
  if (settings->claimer) settings->claimer->check_entry_key(options.key);
  if (settings->claimer && settings->jitter > std::chrono::nanoseconds::zero() &&
      settings->jitter >= settings->claimer->dedup_window()) {
    throw std::invalid_argument(fmt::format(
        "add: jitter {} is not below the claimer's dedup window {}: every fire would be too old to claim (stale)",
        format_duration(settings->jitter), format_duration(settings->claimer->dedup_window())));
  }
  if (settings->leader_gated && !settings->claimer && settings->jitter > std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format(
        "add: jitter {} with an elector and no claimer: nothing would stop a fire from running twice when "
        "leadership moves inside the jitter window; use a claimer as well (the daemon's --coordination both)",
        format_duration(settings->jitter)));
  }
  if ((settings->claimer || settings->leader_gated) && schedule->is_process_anchored()) {
    throw std::invalid_argument(fmt::format("add: entry \"{}\": a process-anchored every() schedule cannot be "
                                            "coordinated (replicas never agree on its instants, so each would run "
                                            "every fire); use aligned_every() or a cron spec",
                                            options.key));
  }
  return settings;
}

EntryId Scheduler::Impl::add(SchedulePtr schedule, Job job, EntryOptions options) {
  if (!job) throw std::invalid_argument("add: job is empty");
  auto settings = prepare(schedule, options);
  auto entry = std::make_shared<Entry>();
  entry->job = std::move(job);
  entry->settings = std::move(settings);
  entry->schedule = std::move(schedule);
  const auto& resolved = *entry->settings;
  if (resolved.overlap != OverlapPolicy::allow) entry->overlap = std::make_unique<detail::OverlapState>();
  // Jitter and a waiting overlap come between the election and the claim,
  // fire by fire (run.cpp's decide()). A fire of an overlap=skip job whose
  // overlap is fleet-wide joins a claim batch: its local overlap is looked
  // at before the claim (dispatch.cpp's skip_busy_here()) and entered after.
  const bool skips_fleet_wide = resolved.overlap == OverlapPolicy::skip && registry_on() && !options.key.empty();
  entry->batchable = resolved.claimer && resolved.jitter <= std::chrono::nanoseconds::zero() &&
                     (resolved.overlap == OverlapPolicy::allow || skips_fleet_wide);
  const Instant now = clock_->now();
  std::vector<Event> events;
  EntryId id = 0;
  bool running = false;
  {
    std::lock_guard guard(mutex_);
    if (state_ == State::stopping || state_ == State::stopped) {
      throw SchedulerError(SchedulerError::Code::stopped, "add: the scheduler is stopped");
    }
    if (entries_.size() >= options_.limits.max_entries) {
      throw SchedulerError(SchedulerError::Code::capacity_reached,
                           fmt::format("add: max_entries ({}) reached", options_.limits.max_entries));
    }
    if (!options.key.empty() && keys_.contains(options.key)) {
      throw SchedulerError(SchedulerError::Code::duplicate_key, fmt::format("add: key \"{}\" is already used", options.key));
    }
    id = next_id_++;
    entry->identity = EntryIdentity{id, std::move(options.name), options.key};
    if (!options.key.empty()) keys_.emplace(std::move(options.key), id);
    if (options.last_run) entry->prev = options.last_run->time_since_epoch().count();
    const auto first = entry->schedule->next(options.last_run.value_or(now));
    entry->next = first.value_or(Entry::no_instant);
    track_cursor(*entry, now);
    toggle_jobs_digest(*entry);
    if (ledger_ && !entry->identity.key.empty()) {
      ledger_->track(entry->identity.key, resolved.ledger_retention, resolved.claimer || resolved.leader_gated);
    }
    entries_.emplace(id, entry);
    heap_.push(entry, events_.active() ? &events : nullptr);
    running = state_ == State::running;
  }
  if (running) queue_catch_up(entry);  // else start() does
  loop_cv_.notify_one();
  for (auto& event : events) publish(std::move(event));
  return id;
}

void Scheduler::Impl::remove(EntryId id) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      throw SchedulerError(SchedulerError::Code::entry_not_found, fmt::format("remove: no entry {}", id));
    }
    entry = std::move(it->second);
    entries_.erase(it);
    if (!entry->identity.key.empty()) keys_.erase(entry->identity.key);
    toggle_jobs_digest(*entry);
    heap_.retire(*entry);
    entry->removed.store(true);
    heap_.compact();
  }
  runs_.request_stop_where([id](const detail::Run& run) { return run.entry_id == id; }, false);
  write_tombstone(*entry);
}

void Scheduler::Impl::set_paused(EntryId id, bool paused) {
  if (!change_paused(id, paused)) {
    throw SchedulerError(SchedulerError::Code::entry_not_found,
                         fmt::format("{}: no entry {}", paused ? "pause" : "resume", id));
  }
}

std::optional<bool> Scheduler::Impl::change_paused(EntryId id, bool paused) {
  std::vector<Event> events;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    if (it->second->paused == paused) return false;
    set_paused_locked(it->second, paused, events);
  }
  loop_cv_.notify_one();
  for (auto& event : events) publish(std::move(event));
  return true;
}

void Scheduler::Impl::set_paused_locked(const std::shared_ptr<Entry>& entry, bool paused, std::vector<Event>& events) {
  if (entry->paused == paused) return;
  heap_.retire(*entry);
  entry->paused = paused;
  if (!paused) {
    // Resume from now: nothing missed while paused is replayed.
    entry->next = entry->schedule->next(clock_->now()).value_or(Entry::no_instant);
    heap_.push(entry, events_.active() ? &events : nullptr);
  }
  heap_.compact();
}

void Scheduler::Impl::update(EntryId id, SchedulePtr schedule) {
  if (!schedule) throw std::invalid_argument("update: schedule is null");
  if (schedule->is_process_anchored() && coordinated(id)) {
    throw std::invalid_argument("update: a process-anchored every() schedule cannot be coordinated; use aligned_every()");
  }
  std::vector<Event> events;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      throw SchedulerError(SchedulerError::Code::entry_not_found, fmt::format("update: no entry {}", id));
    }
    Entry& entry = *it->second;
    heap_.retire(entry);
    toggle_jobs_digest(entry);
    entry.schedule = std::move(schedule);
    toggle_jobs_digest(entry);
    const Instant now = clock_->now();
    entry.next = entry.schedule->next(now).value_or(Entry::no_instant);
    refresh_cursor_settings(entry, now);
    heap_.push(it->second, events_.active() ? &events : nullptr);
    heap_.compact();
  }
  loop_cv_.notify_one();
  for (auto& event : events) publish(std::move(event));
}

Fire Scheduler::Impl::make_manual_fire(EntryId id) {
  std::lock_guard guard(mutex_);
  if (state_ != State::running) {
    throw SchedulerError(SchedulerError::Code::not_running, "trigger: the scheduler is not running");
  }
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    throw SchedulerError(SchedulerError::Code::entry_not_found, fmt::format("trigger: no entry {}", id));
  }
  return Fire{it->second, clock_->now(), FireKind::manual};
}

std::optional<RunOutcome> Scheduler::Impl::trigger_and_wait(EntryId id, std::chrono::nanoseconds wait) {
  Fire fire = make_manual_fire(id);
  auto slot = std::make_shared<detail::OutcomeSlot>();
  fire.outcome = slot;
  std::vector<Fire> batch{std::move(fire)};
  const bool stopping = enqueue(batch);
  if (stopping) throw SchedulerError(SchedulerError::Code::not_running, "trigger_and_wait: the scheduler is stopping");
  if (!batch.empty()) throw SchedulerError(SchedulerError::Code::queue_full, "trigger_and_wait: the run queue is full");
  // Waits on the scheduler's clock, so virtual time bounds it in tests.
  std::unique_lock lock(slot->mutex);
  const auto deadline = clock_->steady_now() + wait;
  while (!slot->value && clock_->steady_now() < deadline) clock_->wait_until(slot->cv, lock, deadline);
  return slot->value;
}

std::size_t Scheduler::Impl::trigger_by_name(std::string_view name) {
  std::vector<Fire> batch;
  {
    std::lock_guard guard(mutex_);
    if (state_ != State::running) {
      throw SchedulerError(SchedulerError::Code::not_running, "trigger_by_name: the scheduler is not running");
    }
    const Instant now = clock_->now();
    for (const auto& [id, entry] : entries_) {
      if (entry->identity.name == name) batch.push_back(Fire{entry, now, FireKind::manual});
    }
  }
  const std::size_t wanted = batch.size();
  enqueue(batch);
  return wanted - batch.size();
}

namespace {
// Caller holds the scheduler's lock.
EntrySnapshot snapshot_of(const Entry& entry) {
  const bool paused = entry.paused.load(std::memory_order_relaxed);
  return EntrySnapshot{entry.identity.id,         entry.identity.name,          entry.identity.key,
                       std::string(entry.schedule->spec()), optional_instant(entry.prev),
                       paused ? std::nullopt : optional_instant(entry.next), paused};
}
}  // namespace

std::optional<EntrySnapshot> Scheduler::Impl::snapshot(EntryId id) const {
  std::lock_guard guard(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return snapshot_of(*it->second);
}

std::vector<EntrySnapshot> Scheduler::Impl::snapshots() const {
  std::vector<EntryId> ids;
  {
    std::lock_guard guard(mutex_);
    ids.reserve(entries_.size());
    for (const auto& [id, entry] : entries_) ids.push_back(id);
  }
  std::vector<EntrySnapshot> out;
  out.reserve(ids.size());
  // One lock per batch (not per entry, not for the whole table).
  for (std::size_t begin = 0; begin < ids.size(); begin += snapshot_batch) {
    const std::size_t end = std::min(ids.size(), begin + snapshot_batch);
    std::lock_guard guard(mutex_);
    for (std::size_t i = begin; i < end; ++i) {
      if (auto it = entries_.find(ids[i]); it != entries_.end()) out.push_back(snapshot_of(*it->second));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const EntrySnapshot& a, const EntrySnapshot& b) {
    if (a.next.has_value() != b.next.has_value()) return a.next.has_value();
    return a.next < b.next;
  });
  return out;
}

std::size_t Scheduler::Impl::size() const {
  std::lock_guard guard(mutex_);
  return entries_.size();
}

// ---- the loop ---------------------------------------------------------

void Scheduler::Impl::collect_due(Instant now, std::vector<Fire>& fires, std::vector<Event>& events,
                                  std::vector<std::string>& warnings) {
  const bool want_events = events_.active();
  // Hand fires to the workers in batches, so the first jobs of a large
  // simultaneous burst start while the loop is still planning the rest.
  while (fires.size() < loop_batch) {
    detail::HeapItem* due = heap_.due(now);
    if (due == nullptr) break;
    const detail::HeapItem& item = *due;
    Entry& entry = *item.entry;
    const Instant scheduled = item.at;
    const auto lateness = now - scheduled;
    if (lateness <= options_.missed_tolerance) {
      // On time (or late within tolerance): the fire keeps its instant,
      // and the next one comes from the schedule, not from now.
      fires.push_back(Fire{item.entry, scheduled});
      entry.next = entry.schedule->next(scheduled).value_or(Entry::no_instant);
    } else {
      const auto plan = detail::plan_missed(*entry.schedule, scheduled, now, entry.settings->missed_fire);
      for (const Instant at : plan.runs) fires.push_back(Fire{item.entry, at});
      entry.next = entry.schedule->next(now).value_or(Entry::no_instant);
      if (want_events) {
        events.push_back(MissedFireEvent{Entry::ref(item.entry), scheduled, plan.last_missed, plan.missed,
                                         plan.count_capped, plan.runs.size(), lateness, entry.settings->missed_fire,
                                         false, plan.newest, {}});
      }
      if (options_.log_events) {
        warnings.push_back(fmt::format("entry {} \"{}\": {}{} missed fire(s) from {} to {} ({} late); policy {} runs {}",
                                       entry.identity.id, entry.identity.name, plan.missed, plan.count_capped ? "+" : "",
                                       format_rfc3339(scheduled), format_rfc3339(plan.last_missed),
                                       format_duration(lateness), to_string(entry.settings->missed_fire),
                                       plan.runs.size()));
      }
    }
    heap_.reschedule_top(want_events ? &events : nullptr);
  }
}

void Scheduler::Impl::loop_main() {
  std::vector<Fire> fires;
  std::vector<Event> events;
  std::vector<std::string> warnings;  // logged after unlocking: a logger may call back into us
  std::unique_lock lock(mutex_);
  while (state_ == State::running) {
    // Steady before wall: if the clock moves in between, the sleep below
    // comes out short (a harmless early wake), never long.
    const auto steady = clock_->steady_now();
    fitness_.note_loop_pass();
    const Instant now = clock_->now();
    collect_due(now, fires, events, warnings);
    if (!fires.empty() || !events.empty() || !warnings.empty()) {
      // Never call out (workers' queue, event sinks) under the entry lock.
      // Events first, so observers see "missed" before the runs it caused.
      lock.unlock();
      for (const auto& warning : warnings) log(LogLevel::warning, warning);
      for (auto& event : events) publish(std::move(event));
      enqueue(fires);
      fires.clear();
      events.clear();
      warnings.clear();
      lock.lock();
      continue;  // time moved while we were out; look again
    }
    auto sleep = detail::LeaderFitness::max_loop_sleep;
    if (const auto earliest = heap_.earliest()) sleep = std::min(sleep, std::chrono::nanoseconds{*earliest - now});
    if (sleep > std::chrono::nanoseconds::zero()) clock_->wait_until(loop_cv_, lock, steady + sleep);
  }
}

// ---- the public face ------------------------------------------------------

Scheduler::Scheduler(SchedulerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Scheduler::~Scheduler() {
  impl_->stop(Clock::SteadyTime::max(), false);
  // stop() leaves threads behind only when jobs outlived its deadline or it
  // ran on a worker; join them now (jobs have had stop requested).
  impl_->join_threads_once();
  impl_->detach_elector();
}

EntryId Scheduler::add(std::string_view spec, Job job, EntryOptions options) {
  auto schedule = impl_->parse(spec, options);
  return impl_->add(std::move(schedule), std::move(job), std::move(options));
}
void Scheduler::check(std::string_view spec, const EntryOptions& options) const {
  check(impl_->parse(spec, options), options);
}
void Scheduler::check(const SchedulePtr& schedule, const EntryOptions& options) const {
  EntryOptions copy = options;
  (void)impl_->prepare(schedule, copy);
}
EntryId Scheduler::add(SchedulePtr schedule, Job job, EntryOptions options) {
  return impl_->add(std::move(schedule), std::move(job), std::move(options));
}
void Scheduler::remove(EntryId id) { impl_->remove(id); }
void Scheduler::pause(EntryId id) { impl_->set_paused(id, true); }
void Scheduler::resume(EntryId id) { impl_->set_paused(id, false); }
void Scheduler::update(EntryId id, std::string_view spec) {
  impl_->update(id, impl_->parse(spec, std::nullopt, impl_->coordinated(id)));
}
void Scheduler::update(EntryId id, SchedulePtr schedule) { impl_->update(id, std::move(schedule)); }

void Scheduler::trigger(EntryId id) {
  std::vector<Fire> batch{impl_->make_manual_fire(id)};
  const bool stopping = impl_->enqueue(batch);
  if (stopping) throw SchedulerError(SchedulerError::Code::not_running, "trigger: the scheduler is stopping");
  if (!batch.empty()) throw SchedulerError(SchedulerError::Code::queue_full, "trigger: the run queue is full");
}
std::optional<RunOutcome> Scheduler::trigger_and_wait(EntryId id, std::chrono::nanoseconds wait) {
  return impl_->trigger_and_wait(id, wait);
}
std::size_t Scheduler::trigger_by_name(std::string_view name) { return impl_->trigger_by_name(name); }
std::optional<EntrySnapshot> Scheduler::entry(EntryId id) const { return impl_->snapshot(id); }
std::vector<EntrySnapshot> Scheduler::entries() const { return impl_->snapshots(); }
std::size_t Scheduler::size() const { return impl_->size(); }
QueueDepthEvent Scheduler::queue_depth() const { return impl_->run_queue_.depth(); }
void Scheduler::start() { impl_->start(); }
bool Scheduler::stop(Clock::SteadyTime deadline) { return impl_->stop(deadline, false); }
bool Scheduler::drain(Clock::SteadyTime deadline) { return impl_->stop(deadline, true); }
Clock& Scheduler::clock() const noexcept { return *impl_->clock_; }

}  // namespace fleetcron
