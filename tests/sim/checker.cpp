#include "sim/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace fleetcron::sim {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

namespace {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string ms(nanoseconds t) { return fmt::format("{:.3f}s", static_cast<double>(t.count()) / 1e9); }

/// Why incarnation `inc` did not run a fire, from its own records (empty:
/// no valid reason — a violation). `others_grant` explains an
/// "already-claimed": why the replica holding the claim did not run it.
std::string own_reason(const std::vector<KeyRecord>& history, int inc, const std::string& others_grant, bool missed) {
  bool delivered = false;
  std::string reason;
  for (const KeyRecord& r : history) {
    if (r.incarnation != inc) continue;
    std::string why;
    if (starts_with(r.what, "claimed (answer delivered)")) delivered = true;
    else if (starts_with(r.what, "granted, answer lost")) why = "claim granted, answer lost (timeout or process stopped)";
    else if (starts_with(r.what, "skip stale: claimed, but")) why = "claim answered after the dedup window";
    else if (starts_with(r.what, "skip stale")) why = "older than the dedup window (stale)";
    else if (starts_with(r.what, "skip claim-error: process stop")) why = "replica stopped while claiming";
    else if (starts_with(r.what, "skip claim-error") || starts_with(r.what, "skip election-error")) why = "store error or outage";
    else if (starts_with(r.what, "skip clock-skew")) why = "clock beyond the skew guard";
    else if (starts_with(r.what, "skip store-reset")) why = "scheduled before a store reset's epoch (store-reset)";
    else if (starts_with(r.what, "skip not-leader: leadership of term")) why = "leadership lost before the job started";
    else if (starts_with(r.what, "skip not-leader")) why = "no leader (failover window)";
    else if (starts_with(r.what, "cancelled: stopped before the job started")) why = "claimed, then stopped before the job started";
    else if (starts_with(r.what, "cancelled")) why = "cancelled by shutdown";
    else if (starts_with(r.what, "skip already-claimed")) why = others_grant;
    if (!why.empty() && reason.empty()) reason = why;
  }
  // Told "yours" and did not run it: only a late answer, or (both mode,
  // cancel policy) the loss of the leadership it was claimed under, excuses
  // that.
  // (A claimed fire whose run was then stopped — leadership lost under the
  // cancel policy, or a shutdown — is reported cancelled, claimed: a loss
  // with its reason, never a silent one.)
  if (delivered && reason != "claim answered after the dedup window" &&
      reason != "leadership lost before the job started" && reason != "claimed, then stopped before the job started") {
    return {};
  }
  if (reason.empty() && missed) return "missed while down or paused (policy)";
  return reason;
}

}  // namespace

Report check(const SimOptions& options, const Outcome& outcome) {
  Report report;
  const Instant epoch = sim_epoch();
  const Instant from = epoch + 60s;
  const Instant to = epoch + options.duration - 2 * options.claim_ttl - 10s;

  std::unordered_map<std::string, std::vector<const RunRecord*>> runs_by_key;
  for (const RunRecord& run : outcome.runs) runs_by_key[run.fire_key].push_back(&run);
  report.runs = outcome.runs.size();

  auto violate = [&](std::string property, std::string key, std::string detail) {
    report.violations.push_back(Violation{std::move(property), std::move(key), std::move(detail)});
  };
  auto history_of = [&](const std::string& key) -> const std::vector<KeyRecord>& {
    static const std::vector<KeyRecord> none;
    auto it = outcome.by_key.find(key);
    return it == outcome.by_key.end() ? none : it->second;
  };
  auto wipe_between = [&](nanoseconds a, nanoseconds b) {
    return std::any_of(outcome.wipes.begin(), outcome.wipes.end(), [&](nanoseconds w) { return w > a && w <= b; });
  };

  // Every instant of every job in the horizon: run once, or lost with a reason.
  for (const SimJob& job : sim_jobs()) {
    ParseOptions parse;
    parse.seconds = SecondsField::optional;
    const auto schedule = parse_schedule(job.spec, parse);
    for (auto t = schedule->next(from - 1ns); t && *t <= to; t = schedule->next(*t)) {
      ++report.fires_due;
      const std::string key = fire_key(job.key, *t);
      const auto& history = history_of(key);
      auto found = runs_by_key.find(key);
      const std::size_t runs = found == runs_by_key.end() ? 0 : found->second.size();
      // Every replica whose loop passed t decided it, or reported it missed.
      std::vector<std::pair<int, bool>> passed;  // (incarnation, covered by its missed plan)
      for (const Outcome::Span& span : outcome.spans) {
        if (span.entry_key != job.key || *t < span.from || *t > span.to) continue;
        const bool decided = std::any_of(history.begin(), history.end(), [&](const KeyRecord& r) {
          return r.incarnation == span.incarnation && !starts_with(r.what, "granted");
        });
        const bool missed = std::any_of(outcome.missed.begin(), outcome.missed.end(), [&](const MissedRange& m) {
          return m.incarnation == span.incarnation && m.entry_key == job.key && *t >= m.first && *t <= m.last;
        });
        passed.emplace_back(span.incarnation, missed);
        if (!decided && !missed) {
          violate("P2 no unexplained loss", key,
                  fmt::format("replica r{}/i{} passed this instant without deciding it or reporting it missed",
                              span.replica, span.incarnation));
        }
      }
      if (runs == 1) continue;
      if (runs > 1) {
        const auto& first = *found->second.front();
        const auto& second = *found->second[1];
        const auto lease = std::chrono::duration_cast<nanoseconds>(options.lease_ttl);
        std::set<std::uint64_t> terms;
        std::set<int> incarnations;
        for (const RunRecord* run : found->second) {
          terms.insert(run->fence);
          incarnations.insert(run->incarnation);
        }
        // With claims (claim and both modes) a store that lost its data
        // may lose fires (each reported store-reset), never repeat one: no
        // exception. Leader mode alone can repeat a fire across a wipe.
        bool store_lost_it = false;
        if (!uses_claims(options.mode)) {
          // The lease was lost within one TTL before the second run.
          store_lost_it = wipe_between(second.at - lease, second.at);
        }
        // Leader handover: different leaders (terms, processes), each
        // firing by its own clock, within the clocks' largest difference.
        const auto clocks_apart = 2 * std::chrono::duration_cast<nanoseconds>(options.faults.max_clock_offset) +
                                  std::chrono::duration_cast<nanoseconds>(options.max_clock_skew) + 7s;
        if (store_lost_it) {
          ++report.duplicates_after_store_loss;
        } else if (options.mode == Mode::leader && terms.size() == runs && incarnations.size() == runs &&
                   found->second.back()->at - first.at <= clocks_apart) {
          // Leader mode promises one leader per term, not one run per fire.
          // docs/reliability.md; use a claimer as well.
          ++report.duplicates_at_handover;
        } else {
          violate("P1 no duplicate", key,
                  fmt::format("ran {} times (r{}/i{} at {}, r{}/i{} at {}) with no store loss between", runs,
                              first.replica, first.incarnation, ms(first.at), second.replica, second.incarnation,
                              ms(second.at)));
        }
        continue;
      }
      // Nobody ran it: every replica that passed the instant must give its
      // own reason (one replica's fault does not excuse another's silence).
      if (passed.empty()) {
        ++report.lost["no replica running"];
        continue;
      }
      // Why the holder of a claim (if any) did not run it: explains the
      // others' "already-claimed".
      std::string holder_reason;
      for (const KeyRecord& r : history) {
        if (starts_with(r.what, "granted fence=")) holder_reason = own_reason(history, r.incarnation, {}, false);
      }
      std::string why;
      for (const auto& [incarnation, missed] : passed) {
        const std::string reason = own_reason(history, incarnation, holder_reason, missed);
        if (reason.empty()) {
          violate("P2 no unexplained loss", key,
                  fmt::format("nobody ran it, and incarnation {} gives no valid reason", incarnation));
        } else if (why.empty()) {
          why = reason;
        }
      }
      if (!why.empty()) ++report.lost[why];
    }
  }

  // Runs happen only at instants of their schedule (no invented fires).
  std::unordered_map<std::string, SchedulePtr> schedules;
  for (const SimJob& job : sim_jobs()) {
    ParseOptions parse;
    parse.seconds = SecondsField::optional;
    schedules[job.key] = parse_schedule(job.spec, parse);
  }
  for (const RunRecord& run : outcome.runs) {
    if (schedules.at(run.entry_key)->next(run.scheduled_at - 1ns) != run.scheduled_at) {
      violate("P4 missed-fire policy", run.fire_key, "ran at an instant that is not in its schedule");
    }
  }

  // Fencing.
  if (uses_claims(options.mode)) {
    std::unordered_map<std::uint64_t, const RunRecord*> by_fence;
    for (const RunRecord& run : outcome.runs) {
      auto [it, fresh] = by_fence.emplace(run.fence, &run);
      if (!fresh) {
        violate("P3 fencing", run.fire_key, fmt::format("fence {} also handed to {}", run.fence, it->second->fire_key));
      }
      if (run.fence == 0) violate("P3 fencing", run.fire_key, "claimed run without a fence");
    }
  } else {
    std::unordered_map<std::uint64_t, int> holder;  // term -> incarnation
    std::vector<const RunRecord*> ordered;
    for (const RunRecord& run : outcome.runs) {
      ordered.push_back(&run);
      auto [it, fresh] = holder.emplace(run.fence, run.incarnation);
      if (!fresh && it->second != run.incarnation) {
        violate("P3 fencing", run.fire_key,
                fmt::format("term {} used by incarnations {} and {}", run.fence, it->second, run.incarnation));
      }
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const RunRecord* a, const RunRecord* b) { return a->at < b->at; });
    std::uint64_t highest = 0;
    nanoseconds highest_at{0};
    for (const RunRecord* run : ordered) {
      if (run->fence < highest && run->at > highest_at &&
          !wipe_between(run->at - std::chrono::duration_cast<nanoseconds>(options.lease_ttl), run->at)) {
        violate("P3 fencing", run->fire_key,
                fmt::format("term {} handed to a job at {} after term {} at {}", run->fence, ms(run->at), highest,
                            ms(highest_at)));
      }
      if (run->fence > highest) {
        highest = run->fence;
        highest_at = run->at;
      }
    }
  }

  // Missed-fire policies run exactly what they promise.
  for (const MissedRange& m : outcome.missed) {
    ++report.missed_plans;
    std::uint64_t promised = 0;
    switch (m.policy) {
      case MissedFirePolicy::skip: promised = 0; break;
      case MissedFirePolicy::run_once: promised = m.missed > 0 ? 1 : 0; break;
      case MissedFirePolicy::run_all: promised = std::min<std::uint64_t>(m.missed, 1000); break;
    }
    if (m.runs != promised) {
      violate("P4 missed-fire policy", fire_key(m.entry_key, m.first),
              fmt::format("policy {} planned {} runs for {} missed instants (r{}/i{})", to_string(m.policy), m.runs,
                          m.missed, m.replica, m.incarnation));
    }
  }

  if (!report.violations.empty()) {
    const Violation& v = report.violations.front();
    std::string trace = fmt::format("first violation: {} — {}: {}\nhistory of {}:\n", v.property, v.fire_key, v.detail,
                                    v.fire_key.empty() ? "-" : v.fire_key);
    nanoseconds center{0};
    for (const KeyRecord& r : history_of(v.fire_key)) {
      trace += fmt::format("  {:>10}  r{}/i{}  {}\n", ms(r.at), r.replica, r.incarnation, r.what);
      center = r.at;
    }
    if (auto it = runs_by_key.find(v.fire_key); it != runs_by_key.end()) center = it->second.front()->at;
    if (const auto at = v.fire_key.rfind('@'); at != std::string::npos && center == nanoseconds{0}) {
      center = parse_rfc3339(std::string_view(v.fire_key).substr(at + 1)) - epoch;
    }
    trace += fmt::format("faults within ±{} of {}:\n", ms(2 * options.claim_ttl), ms(center));
    for (const auto& [when, what] : outcome.faults) {
      if (when >= center - 2 * options.claim_ttl && when <= center + 2 * options.claim_ttl) {
        trace += fmt::format("  {:>10}  {}\n", ms(when), what);
      }
    }
    report.trace = std::move(trace);
  }
  return report;
}

std::string summary(const SimOptions& options, const Report& report) {
  std::string lost;
  std::uint64_t total = 0;
  for (const auto& [why, n] : report.lost) {
    lost += fmt::format("{}{}: {}", lost.empty() ? "" : ", ", why, n);
    total += n;
  }
  return fmt::format("seed {} {}: {} fires due, {} runs, {} lost ({}), {} duplicates after store loss, {} at leader handover, {} missed plans, {} violations",
                     options.seed, mode_name(options.mode), report.fires_due, report.runs, total,
                     lost.empty() ? "none" : lost, report.duplicates_after_store_loss, report.duplicates_at_handover, report.missed_plans,
                     report.violations.size());
}

}  // namespace fleetcron::sim
