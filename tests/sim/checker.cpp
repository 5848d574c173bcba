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

/// The loss class of a fire that nobody ran, from its history; empty when
/// the history explains nothing (a violation).
std::string loss_class(const std::vector<KeyRecord>& history, bool covered_by_missed_plan) {
  bool answer_lost = false, granted = false, delivered = false, store_error = false, skew = false, not_leader = false,
       election_error = false, cancelled = false;
  for (const KeyRecord& r : history) {
    if (starts_with(r.what, "granted, answer lost")) answer_lost = true;
    else if (starts_with(r.what, "granted")) granted = true;
    else if (starts_with(r.what, "claimed (answer delivered)")) delivered = true;
    else if (starts_with(r.what, "skip claim-error")) store_error = true;
    else if (starts_with(r.what, "skip clock-skew")) skew = true;
    else if (starts_with(r.what, "skip not-leader")) not_leader = true;
    else if (starts_with(r.what, "skip election-error")) election_error = true;
    else if (starts_with(r.what, "cancelled")) cancelled = true;
  }
  if (delivered) return {};  // a replica was told "yours" and did not run it
  if (answer_lost) return "claim granted, answer lost (timeout or process stopped)";
  if (granted) return {};
  if (store_error || election_error) return "store error or outage";
  if (skew) return "clock beyond the skew guard";
  if (not_leader) return "no leader (failover window)";
  if (cancelled) return "cancelled by shutdown";
  if (covered_by_missed_plan) return "missed while down or paused (policy)";
  return {};
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
      bool covered_by_missed_plan = false;
      for (const Outcome::Span& span : outcome.spans) {
        if (span.entry_key != job.key || *t < span.from || *t > span.to) continue;
        const bool decided = std::any_of(history.begin(), history.end(), [&](const KeyRecord& r) {
          return r.incarnation == span.incarnation && !starts_with(r.what, "granted");
        });
        const bool missed = std::any_of(outcome.missed.begin(), outcome.missed.end(), [&](const MissedRange& m) {
          return m.incarnation == span.incarnation && m.entry_key == job.key && *t >= m.first && *t <= m.last;
        });
        covered_by_missed_plan = covered_by_missed_plan || missed;
        if (!decided && !missed) {
          violate("P2 no unexplained loss", key,
                  fmt::format("replica r{}/i{} passed this instant without deciding it or reporting it missed",
                              span.replica, span.incarnation));
        }
      }
      if (runs == 1) continue;
      if (runs > 1) {
        const auto& first = *found->second.front();
        const auto& last = *found->second.back();
        const auto lease = std::chrono::duration_cast<nanoseconds>(options.lease_ttl);
        std::set<std::uint64_t> terms;
        for (const RunRecord* run : found->second) terms.insert(run->fence);
        // Claims: did the store lose the first grant before the last one?
        // Leases: did it lose the lease within one TTL before the last run?
        nanoseconds since = first.at - lease, until = last.at;
        if (options.mode == Mode::claim) {
          std::vector<nanoseconds> grants;
          for (const KeyRecord& r : history) {
            if (starts_with(r.what, "granted fence=")) grants.push_back(r.at);
          }
          if (!grants.empty()) {
            since = grants.front();
            until = grants.back();
          }
        }
        if (wipe_between(since, until)) {
          ++report.duplicates_after_store_loss;
        } else if (options.mode == Mode::leader && terms.size() == runs) {
          // Leader mode promises one leader per term, not one run per fire:
          // each leader fires by its own clock, so a handover between
          // replicas whose clocks differ can repeat (or skip) the instants
          // in between. docs/reliability.md; use a claimer as well.
          ++report.duplicates_at_handover;
        } else {
          violate("P1 no duplicate", key,
                  fmt::format("ran {} times (r{}/i{} at {}, r{}/i{} at {}) with no store loss between", runs,
                              first.replica, first.incarnation, ms(first.at), last.replica, last.incarnation, ms(last.at)));
        }
        continue;
      }
      const std::string why = loss_class(history, covered_by_missed_plan);
      if (why.empty()) {
        const bool anyone = !history.empty() || std::any_of(outcome.spans.begin(), outcome.spans.end(), [&](const Outcome::Span& s) {
          return s.entry_key == job.key && *t >= s.from && *t <= s.to;
        });
        if (!anyone) {
          ++report.lost["no replica running"];
        } else {
          violate("P2 no unexplained loss", key, "no replica ran it and its history explains nothing");
        }
        continue;
      }
      ++report.lost[why];
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
  if (options.mode == Mode::claim) {
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
                     options.seed, options.mode == Mode::claim ? "claim" : "leader", report.fires_due, report.runs, total,
                     lost.empty() ? "none" : lost, report.duplicates_after_store_loss, report.duplicates_at_handover, report.missed_plans,
                     report.violations.size());
}

}  // namespace fleetcron::sim
