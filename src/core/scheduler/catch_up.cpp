// The fleet state's cursors in the scheduler (docs/fleet-state.md): every
// fire of a keyed entry advances the entry's cursor before it runs, and the
// instants the whole fleet missed while it was down are caught up once
// across the fleet, through FleetState::claim_catch_up(), when the entry is
// added or the scheduler starts.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <iterator>
#include <random>

#include "core/support/fnv1a.h"
#include "core/scheduler/missed_fires.h"
#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

using detail::CursorTracking;
using detail::Entry;
using detail::Fire;
using detail::FireKind;
using detail::FireState;
using std::chrono::nanoseconds;

namespace {

constexpr nanoseconds first_retry{std::chrono::seconds{1}};
constexpr nanoseconds max_retry{std::chrono::seconds{30}};
// Rounds of read, compare-and-set, read again before a catch-up is retried
// later: each lost round means another replica moved the cursor.
constexpr int max_catch_up_rounds = 8;

/// Marks an entry's catch-up under way, until it goes out of scope.
class CatchUpBusy {
 public:
  explicit CatchUpBusy(CursorTracking& tracking) : tracking_(tracking) {}
  CatchUpBusy(const CatchUpBusy&) = delete;
  CatchUpBusy& operator=(const CatchUpBusy&) = delete;
  ~CatchUpBusy() {
    {
      std::lock_guard guard(tracking_.mutex);
      tracking_.busy = false;
    }
    tracking_.idle.notify_all();
  }

 private:
  CursorTracking& tracking_;
};
// The digest of a removed entry's cursor: no schedule's, so a job added
// again later catches up nothing.
constexpr std::uint64_t tombstone_digest = 0x7e3b'0000'0000'dead;

// Why a call into the fleet state failed; it answers with results, but a
// throw (a bad argument, a broken implementation) must fail closed too.
template <typename Call>
auto guarded(Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (...) {
    decltype(call()) failed;
    failed.error = detail::describe_exception(std::current_exception());
    return failed;
  }
}

}  // namespace

std::uint64_t detail::schedule_digest(const Schedule& schedule) {
  std::uint64_t hash = detail::fnv1a(schedule.spec());
  hash = detail::fnv1a("\n", hash);
  return detail::fnv1a(schedule.zone().name(), hash);
}

nanoseconds detail::cursor_keep_for(const Schedule& schedule, Instant now, nanoseconds reach) {
  // The cursor must outlive the longest gap between two fires (or a monthly
  // job's would expire between its fires) plus the reach, and a fleet down
  // for weeks should still find it: at least cursor_min_keep_for.
  nanoseconds gap = std::chrono::hours{24};
  if (const auto a = schedule.next(now)) {
    if (const auto b = schedule.next(*a)) {
      gap = *b - *a;
      if (const auto c = schedule.next(*b)) gap = std::max(gap, nanoseconds{*c - *b});
    }
  }
  gap = std::min(gap, max_cursor_keep_for);
  return std::clamp(reach + 2 * gap, detail::cursor_min_keep_for, max_cursor_keep_for);
}

std::string detail::random_replica_id() {
  std::random_device device;
  const std::uint64_t bits = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return fmt::format("replica-{:016x}", bits);
}

void Scheduler::Impl::track_cursor(Entry& entry, Instant now) {
  if (!options_.fleet.state || entry.identity.key.empty()) return;
  if (entry.settings->catch_up_reach <= nanoseconds::zero()) return;
  entry.cursor = std::make_unique<CursorTracking>();
  entry.cursor->first_loop_instant = entry.next == Entry::no_instant ? now + nanoseconds{1} : entry.next;
  refresh_cursor_settings(entry, now);
}

void Scheduler::Impl::refresh_cursor_settings(Entry& entry, Instant now) {
  if (!entry.cursor) return;
  entry.cursor->digest = detail::schedule_digest(*entry.schedule);
  entry.cursor->keep_for = detail::cursor_keep_for(*entry.schedule, now, entry.settings->catch_up_reach).count();
}

void Scheduler::Impl::queue_catch_up(const std::shared_ptr<Entry>& entry) {
  if (!entry->cursor || entry->cursor->caught_up.load() || !catch_up_queue_) return;
  catch_up_queue_->add(entry);
}

std::unique_ptr<detail::CatchUpQueue> Scheduler::Impl::make_catch_up_queue() {
  if (!options_.fleet.state) return nullptr;
  auto attempt = [this](const std::shared_ptr<Entry>& entry, nanoseconds backoff) {
    const CatchUpOutcome outcome = catch_up(entry, nanoseconds::max());
    if (!outcome.done && !outcome.quiet) {  // not an event: logged whatever log_events says
      log(LogLevel::warning, fmt::format("entry \"{}\": catch-up failed, retried in {}: {}", entry->identity.key,
                                         format_duration(backoff), outcome.error));
    }
    return outcome.done || entry->removed.load();
  };
  auto prefetch = [this](std::span<const std::shared_ptr<Entry>> entries) { prefetch_cursors(entries); };
  return std::make_unique<detail::CatchUpQueue>(clock_, std::move(attempt), first_retry, max_retry, std::move(prefetch));
}

void Scheduler::Impl::prefetch_cursors(std::span<const std::shared_ptr<Entry>> entries) {
  std::vector<std::string> keys;
  for (const auto& entry : entries) {
    if (entry->cursor && !entry->cursor->caught_up.load() && !entry->removed.load()) keys.push_back(entry->identity.key);
  }
  std::vector<CursorRead> reads;
  if (keys.size() > 1) {
    try {
      reads = options_.fleet.state->read_cursors(keys);
    } catch (...) {
      reads.clear();  // each catch-up reads its own then
    }
  }
  std::lock_guard guard(prefetched_mutex_);
  prefetched_cursors_.clear();  // the batch before's, unused (an entry removed meanwhile): stale now
  for (std::size_t i = 0; i < reads.size() && i < keys.size(); ++i) {
    if (reads[i].status != CursorRead::Status::error) prefetched_cursors_.insert_or_assign(keys[i], std::move(reads[i]));
  }
}

std::optional<CursorRead> Scheduler::Impl::take_prefetched_cursor(const std::string& key) {
  std::lock_guard guard(prefetched_mutex_);
  const auto it = prefetched_cursors_.find(key);
  if (it == prefetched_cursors_.end()) return std::nullopt;
  CursorRead read = std::move(it->second);
  prefetched_cursors_.erase(it);
  return read;
}

void Scheduler::Impl::note_unled(const Fire& fire) {
  const auto& tracking = fire.entry->cursor;
  if (!tracking || fire.kind != FireKind::automatic) return;
  const auto at = fire.scheduled_at.time_since_epoch().count();
  auto seen = tracking->unled_until.load();
  while (seen < at && !tracking->unled_until.compare_exchange_weak(seen, at)) {
  }
  // Caught up before (a leader that lost its lease): again when it leads.
  if (tracking->caught_up.exchange(false)) queue_catch_up(fire.entry);
}

std::string Scheduler::Impl::catch_up_pending(const Fire& fire) {
  const auto& tracking = fire.entry->cursor;
  if (!tracking || tracking->caught_up.load()) return {};
  const CatchUpOutcome outcome = catch_up(fire.entry, catch_up_wait);
  if (outcome.done) return {};
  return fmt::format("the entry's catch-up of the instants the fleet missed has not completed ({}); running this fire "
                     "first would move its cursor past them",
                     outcome.error);
}

Scheduler::Impl::CatchUpOutcome Scheduler::Impl::catch_up(const std::shared_ptr<Entry>& entry, nanoseconds wait) {
  CursorTracking& tracking = *entry->cursor;
  {
    std::unique_lock lock(tracking.mutex);
    const auto idle = [&] { return !tracking.busy; };
    if (wait == nanoseconds::max()) {
      tracking.idle.wait(lock, idle);
    } else if (!tracking.idle.wait_for(lock, wait, idle)) {
      return {false, "another thread is catching the entry up", false};
    }
    tracking.busy = true;
  }
  const CatchUpBusy busy(tracking);  // released however this returns
  if (tracking.caught_up.load() || entry->removed.load()) return {true, {}, false};
  if (entry->paused.load()) return {false, "the entry is paused", true};
  if (std::string refusal = settings_refusal(); !refusal.empty()) return {false, std::move(refusal), true};
  const detail::Election election = claims_->elect();
  if (election.refused) {
    return {false, election.error.empty() ? std::string(to_string(*election.refused)) : election.error,
            *election.refused == SkipReason::not_leader};
  }
  const std::string& key = entry->identity.key;
  // Read with the other catch-ups due together (prefetch_cursors), or now.
  std::optional<CursorRead> prefetched = take_prefetched_cursor(key);
  CursorRead read = prefetched ? std::move(*prefetched) : guarded([&] { return options_.fleet.state->read_cursor(key); });
  if (read.status == CursorRead::Status::error) return {false, "reading the cursor: " + read.error};
  std::optional<JobCursor> seen = read.cursor;
  if (!seen) {
    // Every job of a new fleet has none: 20 lines a minute, the rest counted.
    const auto take = no_cursor_quota_.take(clock_->steady_now());
    if (take.kind != detail::LogQuota::Kind::quiet) {
      const std::string before =
          take.left_out == 0 ? "" : fmt::format(" ({} more such lines were left out since the last one logged)", take.left_out);
      log(LogLevel::info, fmt::format("entry \"{}\": no cursor in the fleet state (a job new to the fleet, or gone "
                                      "longer than its cursor lives, {}); nothing is caught up{}{}",
                                      key, format_duration(nanoseconds{tracking.keep_for}), before,
                                      take.kind == detail::LogQuota::Kind::last
                                          ? " (more such lines this minute are left out; the next one logged counts them)"
                                          : ""));
    }
  }
  for (int round = 0; seen && round < max_catch_up_rounds; ++round) {
    const std::optional<CatchUpPlan> plan = plan_catch_up(*entry, *seen);
    if (!plan) break;
    // Won now, the range would be cancelled: leave it to whoever runs.
    if (entry->removed.load() || !runs_.open()) return {false, "stopping", true};
    CatchUpClaim answer = guarded([&] {
      return options_.fleet.state->claim_catch_up(key, seen, plan->missed.last_missed, plan->digest,
                                                  nanoseconds{tracking.keep_for}, options_.fleet.replica_id);
    });
    if (answer.status == CatchUpClaim::Status::error && !settle_unanswered(key, *seen, *plan, answer)) {
      return {false, "claiming the catch-up: " + answer.error};
    }
    if (answer.status == CatchUpClaim::Status::claimed) {
      run_catch_up(entry, *seen, *plan, election.grant);
      break;
    }
    if (answer.status == CatchUpClaim::Status::epoch_changed) {
      report_unknown_catch_up(entry, *seen, plan->missed, answer.current ? answer.current->epoch : std::string());
      break;
    }
    seen = answer.current;  // another replica moved it: what is left after its value?
    if (round + 1 == max_catch_up_rounds) return {false, "the cursor kept moving under the compare-and-set"};
  }
  tracking.caught_up = true;
  return {true, {}, false};
}

bool Scheduler::Impl::settle_unanswered(const std::string& key, const JobCursor& seen, const CatchUpPlan& plan,
                                        CatchUpClaim& answer) {
  // The store may have applied it: our claimant and instant say so.
  const CursorRead read = guarded([&] { return options_.fleet.state->read_cursor(key); });
  const bool ours = read.cursor && read.cursor->claimant == options_.fleet.replica_id &&
                    read.cursor->instant == cursor_instant(plan.missed.last_missed);
  if (!ours) return false;
  // Applied in another epoch than the cursor's: the store's answer would
  // have been epoch_changed.
  answer.status = read.cursor->epoch == seen.epoch ? CatchUpClaim::Status::claimed : CatchUpClaim::Status::epoch_changed;
  answer.current = read.cursor;
  return true;
}

std::optional<Scheduler::Impl::CatchUpPlan> Scheduler::Impl::plan_catch_up(const Entry& entry, const JobCursor& seen) {
  const CursorTracking& tracking = *entry.cursor;
  CatchUpPlan plan;
  SchedulePtr schedule;
  {
    std::lock_guard guard(mutex_);  // update() replaces both together
    schedule = entry.schedule;
    plan.digest = tracking.digest;
  }
  if (seen.schedule_digest != plan.digest) {
    log(LogLevel::info, fmt::format("entry \"{}\": its cursor was written for another schedule (or by its removal); "
                                    "nothing is caught up",
                                    entry.identity.key));
    return std::nullopt;
  }
  const Instant now = clock_->now();
  const Instant after = std::max(seen.instant, now - entry.settings->catch_up_reach - nanoseconds{1});
  // Before the loop's first instant here, and the instants it skipped
  // while no lease was held here.
  const Instant unled{nanoseconds{tracking.unled_until.load()}};
  const Instant limit = std::min(std::max(tracking.first_loop_instant - nanoseconds{1}, unled), now);
  const auto first = schedule->next(after);
  if (!first || *first > limit) return std::nullopt;
  plan.missed = detail::plan_missed(*schedule, *first, limit, entry.settings->missed_fire);
  if (!options_.fleet.catch_up_beyond_dedup_window) {
    // Reported, but run only where claims still keep each instant once
    // (nowhere without a claimer: leader mode).
    const auto& claimer = entry.settings->claimer;
    const Instant window_start = claimer ? now - claimer->dedup_window() : Instant::max();
    const auto before = plan.missed.runs.size();
    std::erase_if(plan.missed.runs, [&](Instant at) { return at < window_start; });
    plan.withheld = before - plan.missed.runs.size();
  }
  return plan;
}

void Scheduler::Impl::run_catch_up(const std::shared_ptr<Entry>& entry, const JobCursor& seen, const CatchUpPlan& plan,
                                   const detail::Grant& grant) {
  const detail::MissedPlan& missed = plan.missed;
  std::vector<Fire> fires;
  for (const Instant at : missed.runs) {
    Fire fire{entry, at, FireKind::catch_up};
    fire.grant = grant;
    fire.state = entry->settings->claimer ? FireState::claiming : FireState::granted;
    fires.push_back(std::move(fire));
  }
  // Claimed like any fire (the dedup window aside): an instant young
  // enough for a replica's loop to reach late is then run once either way.
  if (entry->settings->claimer) claims_->claim(fires);
  std::erase_if(fires, [](const Fire& f) { return f.state != FireState::granted; });
  // Reported with what is left to run here: an instant whose claim another
  // replica won, or that failed, has its own record; so has each run's end.
  const auto policy = entry->settings->missed_fire;
  const std::string withheld =
      plan.withheld == 0 ? std::string() : fmt::format("{} older than the claims' dedup window not run", plan.withheld);
  if (options_.log_events) {
    log(LogLevel::warning,
        fmt::format("entry \"{}\": the fleet missed {}{} fire(s) up to {} (its cursor was at {}); policy {} runs "
                    "{} of them here, once across the fleet{}{}{}",
                    entry->identity.key, missed.missed, missed.count_capped ? "+" : "", format_rfc3339(missed.last_missed),
                    format_rfc3339(seen.instant), to_string(policy), fires.size(), withheld.empty() ? "" : " (",
                    withheld, withheld.empty() ? "" : ")"));
  }
  publish(MissedFireEvent{Entry::ref(entry), missed.first_missed, missed.last_missed, missed.missed, missed.count_capped,
                          fires.size(), clock_->now() - missed.last_missed, policy, true, {}, withheld});
  if (entry->overlap && fires.size() > 1) {
    // The entry limits overlap: its instants run one after another, each
    // queued when the one before it ends (execute()).
    auto rest = std::make_shared<std::deque<Fire>>(std::make_move_iterator(fires.begin() + 1),
                                                   std::make_move_iterator(fires.end()));
    fires.resize(1);
    fires.front().chain = std::move(rest);
  }
  enqueue(fires);
}

// Rule 4 (docs/fleet-state.md): the cursor outlived a store restart,
// failover or restore, so it may point before fires that ran since; the
// range is reported, not run, and the cursor starts again from its end.
void Scheduler::Impl::report_unknown_catch_up(const std::shared_ptr<Entry>& entry, const JobCursor& seen,
                                              const detail::MissedPlan& missed, const std::string& epoch) {
  // Short enough for a ledger reason (256 bytes) after the policy's words.
  const std::string why =
      fmt::format("catch-up-unknown: the cursor ({}) predates the store's last restart, failover or restore, so it may "
                  "point before fires that ran",
                  format_rfc3339(seen.instant));
  if (options_.log_events) {
    log(LogLevel::warning, fmt::format("entry \"{}\": {}{} fire(s) up to {} may have been missed while the fleet was "
                                       "down, but nothing is caught up: {} (epoch {}, now {})",
                                       entry->identity.key, missed.missed, missed.count_capped ? "+" : "",
                                       format_rfc3339(missed.last_missed), why, seen.epoch.empty() ? "none" : seen.epoch,
                                       epoch.empty() ? "none" : epoch));
  }
  publish(MissedFireEvent{Entry::ref(entry), missed.first_missed, missed.last_missed, missed.missed, missed.count_capped,
                          0, clock_->now() - missed.last_missed, entry->settings->missed_fire, true, {}, why});
}

std::vector<CursorAdvance> Scheduler::Impl::ask_fleet_state(std::span<Fire* const> fires) {
  std::vector<CursorAdvanceRequest> requests;
  requests.reserve(fires.size());
  for (const Fire* fire : fires) {
    const CursorTracking& tracking = *fire->entry->cursor;
    requests.push_back({fire->entry->identity.key, fire->scheduled_at, tracking.digest, nanoseconds{tracking.keep_for}});
  }
  std::vector<CursorAdvance> answers;
  try {
    answers = options_.fleet.state->advance_cursors(requests);
    if (answers.size() != requests.size()) {
      throw std::runtime_error(fmt::format("advance_cursors returned {} answers for {} cursors", answers.size(),
                                           requests.size()));
    }
  } catch (...) {
    answers.assign(requests.size(), CursorAdvance{CursorAdvance::Status::error, std::nullopt,
                                                  detail::describe_exception(std::current_exception())});
  }
  return answers;
}

void Scheduler::Impl::advance_cursors(std::span<Fire> fires) {
  std::vector<Fire*> moving;
  for (Fire& fire : fires) {
    if (fire.state == FireState::granted && fire.kind == FireKind::automatic && fire.entry->cursor) moving.push_back(&fire);
  }
  if (moving.empty()) return;
  const std::vector<CursorAdvance> answers = ask_fleet_state(moving);  // one round trip for a claim batch
  for (std::size_t i = 0; i < moving.size(); ++i) {
    Fire& fire = *moving[i];
    const CursorAdvance& advance = answers[i];
    if (advance.status == CursorAdvance::Status::error) {
      const bool was_claimed = detail::ClaimPath::claimed(fire);
      fire.state = FireState::dropped;
      report_skip(fire, SkipReason::claim_error,
                  fmt::format("{}the fleet state's cursor could not be advanced, so the fire does not run (fail "
                              "closed): {}",
                              was_claimed ? "claimed, but " : "", advance.error));
      continue;
    }
    // Advanced after its window (a pause between the claim and here): a
    // catch-up that read the cursor before this advance may run it too.
    if (detail::ClaimPath::claimed(fire) && !claims_->beyond_window(fire)) {
      if (std::string stale = claims_->staleness_now(fire); !stale.empty()) {
        fire.state = FireState::dropped;
        report_skip(fire, SkipReason::stale, "claimed, but its cursor advanced too late: " + stale);
        continue;
      }
    }
    // Leader-gated without a claimer: a catch-up by the next leader that
    // already covers this instant took it (docs/fleet-state.md, rule 3).
    const bool covered = advance.status == CursorAdvance::Status::already_past && advance.current &&
                         !advance.current->claimant.empty() && fire.grant.leader_gated &&
                         !fire.entry->settings->claimer;
    if (covered) {
      fire.state = FireState::dropped;
      report_skip(fire, SkipReason::not_leader,
                  fmt::format("the catch-up of {} already took this instant (ran or reported it)",
                              advance.current->claimant));
    }
  }
}

void Scheduler::Impl::write_tombstone(const Entry& entry) {
  if (!entry.cursor) return;
  // A job added again later catches up nothing (another digest). A
  // replica still running it writes its digest back on its next fire.
  const CursorAdvance advance = guarded([&] {
    return options_.fleet.state->advance_cursor(entry.identity.key, clock_->now(), tombstone_digest,
                                                nanoseconds{entry.cursor->keep_for});
  });
  if (advance.status == CursorAdvance::Status::error) {
    log(LogLevel::warning, fmt::format("entry \"{}\" removed, but its cursor could not be marked removed (if it is "
                                       "added again within its catch-up reach, it may catch up the time it was gone): {}",
                                       entry.identity.key, advance.error));
  }
}

}  // namespace fleetcron
