// The claim path: whether an automatic fire runs on this replica. Every
// one passes through screen() and claim(), alone (a batch of one, from
// run.cpp's decide()) or in a claim batch (dispatch.cpp's decide_batch()).
// Any backend error skips the fire: fail closed.
#include "core/scheduler/claim_path.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "core/scheduler/ledger_records.h"
#include "core/support/describe_exception.h"
#include "fleetcron/duration.h"

namespace fleetcron::detail {

namespace {

// Why a fire this old must not be claimed; empty if it may be.
std::string staleness(Instant now, Instant scheduled_at, const Claimer& claimer) {
  const auto age = now - scheduled_at;
  const auto window = claimer.dedup_window();
  if (age <= window) return {};
  return fmt::format("the fire is {} old, beyond the claimer's dedup window of {}: another replica's claim on it may have "
                     "expired, so claiming it could run it twice",
                     format_duration(age), format_duration(window));
}

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

// One round trip: claim() for a single key, claim_batch() for more. A
// throw or a wrong number of answers fails every key (fail closed).
std::vector<ClaimResult> ask_claimer(Claimer& claimer, const std::vector<std::string>& keys) {
  std::vector<ClaimResult> results;
  try {
    if (keys.size() == 1) {
      results.push_back(claimer.claim(keys.front()));
    } else {
      results = claimer.claim_batch(keys);
    }
    if (results.size() != keys.size()) {
      throw std::runtime_error(fmt::format("claim_batch returned {} results for {} fire keys", results.size(),
                                           keys.size()));
    }
  } catch (...) {
    results.assign(keys.size(), ClaimResult::failed(describe_exception(std::current_exception())));
  }
  return results;
}

}  // namespace

ClaimPath::ClaimPath(Host& host, Settings settings, std::shared_ptr<Clock> clock, LeaderFitness& fitness,
                     const RunsInProgress& runs)
    : host_(host), settings_(std::move(settings)), clock_(std::move(clock)), fitness_(fitness), runs_(runs) {}

Election ClaimPath::elect() {
  Election election;
  if (!settings_.elector) return election;
  // Stepped down after failing claims: not leading here, whatever an
  // elector without a background renewer would answer.
  if (fitness_.stepped_down()) {
    election.refused = SkipReason::not_leader;
    return election;
  }
  Leadership leadership;
  try {
    leadership = settings_.elector->is_leader();
  } catch (...) {
    leadership = Leadership::failed(describe_exception(std::current_exception()));
  }
  switch (leadership.status) {
    case Leadership::Status::error:
      election.refused = SkipReason::election_error;
      election.error = std::move(leadership.error);
      break;
    case Leadership::Status::follower: election.refused = SkipReason::not_leader; break;
    case Leadership::Status::leader: election.grant = Grant{true, leadership.term, leadership.term}; break;
  }
  return election;
}

void ClaimPath::screen(std::span<Fire> fires, const Election& election) {
  std::optional<SkipReason> refused = election.refused;
  std::string error = election.error;
  const bool claims = std::any_of(fires.begin(), fires.end(), [](const Fire& f) { return f.entry->settings->claimer; });
  bool stopping = false;
  if (claims || election.grant.leader_gated) {
    // Lost since the election: refuse before claiming, not after.
    if (!refused && election.grant.leader_gated && runs_.term_lost(election.grant.term)) {
      refused = SkipReason::not_leader;
      error = fmt::format("leadership of term {} was lost", election.grant.term);
    }
    // stop() came while these fires were out of the queue: claiming now
    // would take them from the other replicas only to cancel them here.
    stopping = !runs_.open();
  }
  const Instant now = claims ? clock_->now() : Instant{};
  // Coordinated fires only: one replica alone cannot run a fire twice.
  const std::string refusal = claims || election.grant.leader_gated ? host_.settings_refusal() : std::string();
  for (Fire& fire : fires) {
    const Entry& entry = *fire.entry;
    fire.state = FireState::dropped;
    if (entry.removed.load()) {
      host_.report_cancel(fire, "entry removed", CancelReason::entry_removed);
    } else if (entry.paused.load()) {
      host_.report_cancel(fire, "entry paused", CancelReason::entry_paused);
    } else if (settings_.elector && !entry.settings->leader_gated && !entry.settings->claimer) {
      fire.grant = Grant{};  // EntryScope::replica: this replica's own, whoever leads
      fire.state = FireState::granted;
    } else if (refused) {
      host_.note_unled(fire);
      host_.report_skip(fire, *refused, error);
    } else if (!refusal.empty() && (entry.settings->claimer || election.grant.leader_gated)) {
      host_.report_skip(fire, SkipReason::fleet_settings, refusal);
    } else if (std::string pending = host_.catch_up_pending(fire); !pending.empty()) {
      host_.report_skip(fire, SkipReason::claim_error, std::move(pending));
    } else if (!entry.settings->claimer) {
      fire.grant = election.grant;
      fire.state = FireState::granted;
    } else if (std::string stale = fire.kind == FireKind::recovery ? std::string() : staleness(now, fire.scheduled_at, *entry.settings->claimer);
               !stale.empty()) {
      host_.report_skip(fire, SkipReason::stale, std::move(stale));
    } else if (stopping) {
      host_.report_cancel(fire, "scheduler stopped", CancelReason::scheduler_stopped);
    } else {
      fire.grant = election.grant;
      fire.state = FireState::claiming;
    }
  }
}

void ClaimPath::claim(std::span<Fire> fires) {
  std::vector<std::string> keys;
  for (const Fire& fire : fires) {
    if (fire.state == FireState::claiming) keys.push_back(claim_key(fire));
  }
  if (keys.empty()) return;
  const auto first = std::find_if(fires.begin(), fires.end(), [](const Fire& f) { return f.state == FireState::claiming; });
  Claimer& claimer = *first->entry->settings->claimer;
  std::vector<ClaimResult> results = ask_claimer(claimer, keys);
  const Instant answered = clock_->now();
  std::size_t k = 0;
  for (Fire& fire : fires) {
    if (fire.state != FireState::claiming) continue;
    ClaimResult& result = results[k++];
    fire.state = FireState::dropped;
    if (fire.grant.leader_gated) note_leader_claim(result);
    if (result.status != ClaimResult::Status::claimed) {
      host_.report_skip(fire, skip_reason_of(result.status), std::move(result.error));
      continue;
    }
    // Checked again on the answer: a claim written after the window (a
    // slow store, a pause between the check and the request) may sit
    // beside an expired one. The fire is lost, never run twice.
    std::string stale = beyond_window(fire) ? std::string() : staleness(answered, fire.scheduled_at, claimer);
    if (!stale.empty()) {
      host_.report_skip(fire, SkipReason::stale, "claimed, but " + stale);
      continue;
    }
    fire.grant.fence = result.fence;
    fire.state = FireState::granted;
  }
}

void ClaimPath::drop_claimed_elsewhere(std::span<Fire> fires) {
  if (fires.empty()) return;
  std::vector<std::string> keys;
  keys.reserve(fires.size());
  for (const Fire& fire : fires) keys.push_back(claim_key(fire));
  std::vector<bool> claimed;
  try {
    claimed = fires.front().entry->settings->claimer->already_claimed(keys);
  } catch (...) {
    return;  // tells nothing: each is claimed as usual, and fails there if the store does
  }
  if (claimed.size() != fires.size()) return;
  for (std::size_t i = 0; i < fires.size(); ++i) {
    if (!claimed[i]) continue;
    fires[i].state = FireState::dropped;
    host_.report_skip(fires[i], SkipReason::already_claimed, {});
  }
}

std::string ClaimPath::staleness_now(const Fire& fire) const {
  const auto& claimer = fire.entry->settings->claimer;
  if (!claimer) return {};
  return staleness(clock_->now(), fire.scheduled_at, *claimer);
}

bool ClaimPath::beyond_window(const Fire& fire) const {
  // A re-run of a lost run is claimed once under its own key, found by the
  // one replica whose announcement dropped the lost runner's record.
  return (fire.catch_up() && settings_.catch_up_beyond_dedup_window) || fire.kind == FireKind::recovery;
}

std::string ClaimPath::claim_key(const Fire& fire) {
  return recovery_fire_key(fire_key(fire.entry->identity.key, fire.scheduled_at), fire.recovery);
}

bool ClaimPath::claimed(const Fire& fire) {
  return !fire.manual() && fire.state == FireState::granted && fire.entry->settings->claimer != nullptr;
}

std::string ClaimPath::leadership_changed(const Grant& granted) {
  if (!granted.leader_gated) return {};
  const Election now = elect();
  if (now.refused) {
    return fmt::format("leader of term {} at the scheduled instant, not after the jitter ({}{}{})", granted.term,
                       to_string(*now.refused), now.error.empty() ? "" : ": ", now.error);
  }
  if (now.grant.term != granted.term) {
    return fmt::format("the leadership term changed during the jitter ({} to {})", granted.term, now.grant.term);
  }
  return {};
}

void ClaimPath::note_leader_claim(const ClaimResult& claim) {
  const bool failed = claim.status == ClaimResult::Status::error || claim.status == ClaimResult::Status::clock_skew;
  const std::optional<std::chrono::nanoseconds> failing_for = fitness_.note_claim(failed);
  if (!failing_for) return;
  constexpr std::chrono::nanoseconds step_down_hold = LeaderFitness::step_down_hold;
  if (settings_.log_events) {
    host_.log(LogLevel::error, fmt::format("leading, but every claim failed for {} (last: {}): stepping down, out of the "
                                     "election for {}, so a replica that can claim leads",
                                     format_duration(*failing_for), claim.error, format_duration(step_down_hold)));
  }
  host_.publish(LeadershipStepDownEvent{*failing_for, step_down_hold, claim.error});
}

}  // namespace fleetcron::detail
