#include "sim/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace fleetcron::sim {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// A missed-fire count's cap (events.h, MissedFireEvent): a late range
// records each of its newest this many instants.
constexpr std::uint64_t missed_count_limit = 1000;

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
    else if (starts_with(r.what, "skip fleet-settings")) why = "settings not verified in the replica registry (fleet-settings)";
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

// The properties of docs/reliability.md, one method each, on one Outcome.
class Checker {
 public:
  Checker(const SimOptions& options, const Outcome& outcome) : options_(options), outcome_(outcome) {
    for (const RunRecord& run : outcome.runs) runs_by_key_[run.fire_key].push_back(&run);
    for (const Outcome::Span& span : outcome.spans) replica_of_[span.incarnation] = span.replica;
    report_.runs = outcome.runs.size();
  }
  Report run() {
    check_instants();
    check_runs_are_scheduled();
    if (uses_claims(options_.mode)) {
      check_claim_fences();
    } else {
      check_terms();
    }
    check_missed_plans();
    check_lost_reports();
    if (options_.ledger) {
      check_triggers();
      check_catalogue();
    }
    if (!report_.violations.empty()) write_trace();
    return std::move(report_);
  }

 private:
  void violate(std::string property, std::string key, std::string detail) {
    report_.violations.push_back(Violation{std::move(property), std::move(key), std::move(detail)});
  }
  const std::vector<KeyRecord>& history_of(const std::string& key) const {
    static const std::vector<KeyRecord> none;
    auto it = outcome_.by_key.find(key);
    return it == outcome_.by_key.end() ? none : it->second;
  }
  bool wipe_between(nanoseconds a, nanoseconds b) const {
    return std::any_of(outcome_.wipes.begin(), outcome_.wipes.end(), [&](nanoseconds w) { return w > a && w <= b; });
  }
  void check_instants();
  /// P2: the (incarnation, covered by its missed plan) of every replica
  /// whose loop passed `t`; each must have decided it or reported it missed.
  std::vector<std::pair<int, bool>> replicas_that_passed(const SimJob& job, Instant t, const std::string& key);
  void judge_repeats(const std::string& key, const std::vector<const RunRecord*>& runs);
  void explain_loss(const std::string& key, const std::vector<std::pair<int, bool>>& passed);
  void check_runs_are_scheduled();
  void judge_ledger(const std::string& key, const std::vector<const RunRecord*>& runs,
                    const std::vector<std::pair<int, bool>>& passed);
  void judge_ledger_of_run(const std::string& key, const std::vector<const RunRecord*>& runs, const FireRecord* record);
  struct Reported {  // what a replica did of a fire that the ledger records
    const KeyRecord* what;
    std::string fate;
  };
  void judge_late_miss_record(const std::string& key, const std::vector<const MissedRange*>& late,
                              const std::vector<Reported>& reported, const FireRecord& record);
  void judge_ledger_of_loss(const std::string& key, const std::vector<std::pair<int, bool>>& passed,
                            const FireRecord* record);
  /// The late-loop ranges (not catch-ups) that covered this instant.
  std::vector<const MissedRange*> late_ranges_of(const std::string& key, const std::vector<std::pair<int, bool>>& passed) const {
    std::vector<const MissedRange*> found;
    const auto t = fire_key_instant(key);
    const auto job = key.substr(0, key.rfind('@'));
    for (const auto& [inc, missed] : passed) {
      if (!missed || !t) continue;
      for (const MissedRange& m : outcome_.missed) {
        if (m.incarnation == inc && m.entry_key == job && *t >= m.first && *t <= m.last) found.push_back(&m);
      }
    }
    return found;
  }
  /// Whether incarnation `inc` was killed (SIGKILL) at `at` or later.
  bool killed_after(int inc, nanoseconds at) const {
    const auto it = outcome_.killed.find(inc);
    return it != outcome_.killed.end() && it->second >= at;
  }
  /// Whether the ledger records `inc` queued at `at` may be lost: it was
  /// killed later (its queue goes with it), or its writer said it dropped
  /// records later (a stop whose last write failed — the store's faults
  /// reach it — or a full queue). How far a writer lags behind simulated
  /// time depends on the host's load (time does not wait for it), so any
  /// record queued before may be among them.
  bool queue_lost_after(int inc, nanoseconds at) const {
    const auto it = outcome_.ledger_dropped.find(inc);
    return killed_after(inc, at) || (it != outcome_.ledger_dropped.end() && it->second >= at);
  }
  /// own_reason(), or: told "yours" and killed (SIGKILL) within 2 s, as its
  /// job was about to start (a killed process runs nothing).
  std::string reason_of(const std::vector<KeyRecord>& history, int inc, const std::string& others_grant,
                        bool missed) const {
    std::string reason = own_reason(history, inc, others_grant, missed);
    if (!reason.empty()) return reason;
    const auto killed = outcome_.killed.find(inc);
    const bool killed_at_start = killed != outcome_.killed.end() &&
                                 std::any_of(history.begin(), history.end(), [&](const KeyRecord& r) {
                                   return r.incarnation == inc && starts_with(r.what, "claimed (answer delivered)") &&
                                          killed->second >= r.at && killed->second - r.at <= 2s;
                                 });
    return killed_at_start ? "claimed by a replica killed as its job started" : std::string();
  }
  void check_claim_fences();
  void check_terms();
  void check_missed_plans();
  void check_lost_reports();
  void check_triggers();
  void judge_trigger(const Outcome::TriggerAsked& asked, const std::vector<const RunRecord*>& runs,
                     const std::vector<const Outcome::TriggerLog*>& logs);
  void judge_phantom_trigger(const Outcome::TriggerAsked& asked, const std::vector<const RunRecord*>& runs,
                             const std::vector<const Outcome::TriggerLog*>& logs);
  /// The first time the store's documents went back in [from, to] to
  /// before `written` (a write at `written` was undone), if any.
  const Outcome::DocumentLoss* undone_between(nanoseconds written, nanoseconds from, nanoseconds to) const {
    for (const Outcome::DocumentLoss& loss : outcome_.document_losses) {
      if (loss.at >= from && loss.at <= to && (loss.lost == nanoseconds::max() || written > loss.at - loss.lost)) return &loss;
    }
    return nullptr;
  }
  /// When the trigger expires (simulated time): its last send's stamp plus its wait.
  static nanoseconds expiry_of(const Outcome::TriggerAsked& asked) {
    return asked.stamps.back() - sim_epoch() + asked.wait;
  }
  void check_catalogue();
  void write_trace();

  const SimOptions& options_;
  const Outcome& outcome_;
  Report report_;
  std::unordered_map<std::string, std::vector<const RunRecord*>> runs_by_key_;
  std::unordered_map<int, int> replica_of_;  // incarnation -> replica
};

// Every instant of every job in the horizon: run once, or lost with a reason.
void Checker::check_instants() {
  const Instant epoch = sim_epoch();
  const Instant from = epoch + 60s;
  const Instant to = epoch + options_.duration - 2 * options_.claim_ttl - 10s;
  for (const SimJob& job : sim_jobs()) {
    ParseOptions parse;
    parse.seconds = SecondsField::optional;
    const auto schedule = parse_schedule(job.spec, parse);
    for (auto t = schedule->next(from - 1ns); t && *t <= to; t = schedule->next(*t)) {
      ++report_.fires_due;
      const std::string key = fire_key(job.key, *t);
      const auto passed = replicas_that_passed(job, *t, key);
      auto found = runs_by_key_.find(key);
      const std::size_t runs = found == runs_by_key_.end() ? 0 : found->second.size();
      if (runs > 1) judge_repeats(key, found->second);
      if (runs == 0) explain_loss(key, passed);
      if (options_.ledger) {
        static const std::vector<const RunRecord*> none;
        judge_ledger(key, runs == 0 ? none : found->second, passed);
      }
    }
  }
}

std::vector<std::pair<int, bool>> Checker::replicas_that_passed(const SimJob& job, Instant t, const std::string& key) {
  const auto& history = history_of(key);
  std::vector<std::pair<int, bool>> passed;
  for (const Outcome::Span& span : outcome_.spans) {
    if (span.entry_key != job.key || t < span.from || t > span.to) continue;
    const bool decided = std::any_of(history.begin(), history.end(), [&](const KeyRecord& r) {
      return r.incarnation == span.incarnation && !starts_with(r.what, "granted");
    });
    const bool missed = std::any_of(outcome_.missed.begin(), outcome_.missed.end(), [&](const MissedRange& m) {
      return m.incarnation == span.incarnation && m.entry_key == job.key && t >= m.first && t <= m.last;
    });
    passed.emplace_back(span.incarnation, missed);
    if (!decided && !missed) {
      violate("P2 no unexplained loss", key,
              fmt::format("replica r{}/i{} passed this instant without deciding it or reporting it missed", span.replica,
                          span.incarnation));
    }
  }
  return passed;
}

// P1: a fire that ran more than once.
void Checker::judge_repeats(const std::string& key, const std::vector<const RunRecord*>& runs) {
  const auto& first = *runs.front();
  const auto& second = *runs[1];
  const auto lease = std::chrono::duration_cast<nanoseconds>(options_.lease_ttl);
  std::set<std::uint64_t> terms;
  std::set<int> incarnations;
  for (const RunRecord* run : runs) {
    terms.insert(run->fence);
    incarnations.insert(run->incarnation);
  }
  // With claims (claim and both modes) a store that lost its data may lose
  // fires (each reported store-reset), never repeat one: no exception.
  // Leader mode alone can repeat a fire across a wipe: the lease was lost
  // within one TTL before the second run.
  const bool store_lost_it = !uses_claims(options_.mode) && wipe_between(second.at - lease, second.at);
  // Leader handover: different leaders (terms, processes), each firing by
  // its own clock, within the clocks' largest difference.
  // The farthest apart two clocks can be: a replica beyond the skew guard
  // (guard + 5 s) or at its edge (guard - 1 s), or anywhere within the
  // offsets, on each side; plus drift and 7 s of slack.
  const nanoseconds offset = options_.faults.max_clock_offset;
  const nanoseconds guard = options_.max_clock_skew;
  const nanoseconds drift{static_cast<std::int64_t>(2 * options_.faults.max_drift_ppm * 1e-6 *
                                                    static_cast<double>(nanoseconds(options_.duration).count()))};
  const auto clocks_apart = std::max(offset, guard + 5s) + std::max(offset, guard - 1s) + drift + 7s;
  // A leader paused past its lease that leads again replays what its
  // successor ran, as its missed-fire policy says (run-all): the later
  // runs are part of a missed range their replica reported.
  const bool replayed = std::all_of(runs.begin() + 1, runs.end(), [&](const RunRecord* run) {
    return std::any_of(outcome_.missed.begin(), outcome_.missed.end(), [&](const MissedRange& m) {
      return m.incarnation == run->incarnation && m.entry_key == run->entry_key && run->scheduled_at >= m.first &&
             run->scheduled_at <= m.last;
    });
  });
  if (store_lost_it) {
    ++report_.duplicates_after_store_loss;
  } else if (options_.mode == Mode::leader && terms.size() == runs.size() && incarnations.size() == runs.size() &&
             (runs.back()->at - first.at <= clocks_apart || replayed)) {
    // Leader mode promises one leader per term, not one run per fire.
    // docs/reliability.md; use a claimer as well.
    ++report_.duplicates_at_handover;
  } else {
    violate("P1 no duplicate", key,
            fmt::format("ran {} times (r{}/i{} at {}, r{}/i{} at {}) with no store loss between", runs.size(),
                        first.replica, first.incarnation, ms(first.at), second.replica, second.incarnation,
                        ms(second.at)));
  }
}

// P2: nobody ran it. Every replica that passed the instant must give its
// own reason (one replica's fault does not excuse another's silence).
void Checker::explain_loss(const std::string& key, const std::vector<std::pair<int, bool>>& passed) {
  if (passed.empty()) {
    ++report_.lost["no replica running"];
    return;
  }
  const auto& history = history_of(key);
  // Why the holder of a claim (if any) did not run it: explains the
  // others' "already-claimed".
  std::string holder_reason;
  for (const KeyRecord& r : history) {
    if (starts_with(r.what, "granted fence=")) holder_reason = reason_of(history, r.incarnation, {}, false);
  }
  std::string why;
  for (const auto& [incarnation, missed] : passed) {
    const std::string reason = reason_of(history, incarnation, holder_reason, missed);
    if (reason.empty()) {
      violate("P2 no unexplained loss", key, fmt::format("nobody ran it, and incarnation {} gives no valid reason", incarnation));
    } else if (why.empty()) {
      why = reason;
    }
  }
  if (!why.empty()) ++report_.lost[why];
}

// P5: the ledger holds, for every instant, the record of what happened to it.
void Checker::judge_ledger(const std::string& key, const std::vector<const RunRecord*>& runs,
                           const std::vector<std::pair<int, bool>>& passed) {
  const auto it = outcome_.ledger.find(key);
  const FireRecord* record = it == outcome_.ledger.end() ? nullptr : &it->second;
  if (runs.empty()) {
    judge_ledger_of_loss(key, passed, record);
  } else {
    judge_ledger_of_run(key, runs, record);
  }
}

bool is_run_fate(const FireRecord& record) {
  return record.fate == FireFate::running || record.fate == FireFate::lost || record.fate == FireFate::succeeded ||
         record.fate == FireFate::failed || record.fate == FireFate::timed_out ||
         (record.fate == FireFate::cancelled && record.attempts > 0);
}

// It ran: the record is one of its runs (replica, fence), in a state that
// fits how the run ended — still `running` or `lost` only if its runner was
// killed.
void Checker::judge_ledger_of_run(const std::string& key, const std::vector<const RunRecord*>& runs,
                                  const FireRecord* record) {
  const RunRecord* run = nullptr;
  for (const RunRecord* r : runs) {
    if (record != nullptr && is_run_fate(*record) && record->fence == r->fence &&
        record->replica_id == sim_replica_id(r->replica, r->incarnation)) {
      run = r;
    }
  }
  if (run == nullptr) {
    // The run's records were still in its runner's queue when it was killed.
    const bool queue_lost = std::all_of(runs.begin(), runs.end(), [&](const RunRecord* r) {
      return queue_lost_after(r->incarnation, r->at);
    });
    if (queue_lost) {
      ++report_.ledger["no record: its runner was killed, or its writer dropped it, before writing it"];
      return;
    }
    violate("P5 ledger", key,
            record == nullptr ? fmt::format("ran (r{}/i{}, fence {}) but the ledger has no record of it",
                                            runs.front()->replica, runs.front()->incarnation, runs.front()->fence)
                              : fmt::format("ran (r{}/i{}, fence {}) but the ledger says {} {} by {} (fence {})",
                                            runs.front()->replica, runs.front()->incarnation, runs.front()->fence,
                                            to_string(record->fate), record->reason, record->replica_id, record->fence));
    return;
  }
  // Its end's record is lost with its runner's queue (killed, or dropped).
  const bool end_unwritten = queue_lost_after(run->incarnation, run->at);
  if ((record->fate == FireFate::running || record->fate == FireFate::lost) && !end_unwritten) {
    violate("P5 ledger", key,
            fmt::format("the ledger says {}, but its runner r{}/i{} lived on", to_string(record->fate), run->replica,
                        run->incarnation));
    return;
  }
  ++report_.ledger[std::string(to_string(record->fate))];
}

// Nobody ran it: the record is the skip (or the cancel of a claimed fire)
// that one of the replicas reported; none only where the scheduler writes
// none (already-claimed; clock-skew, dated on a skewed clock), or its
// writer was killed first.
void Checker::judge_ledger_of_loss(const std::string& key, const std::vector<std::pair<int, bool>>& passed,
                                   const FireRecord* record) {
  std::vector<Reported> reported;  // what the replicas did that the ledger records
  bool claimed_by_the_killed = false;
  bool cancelled_unclaimed = false;
  for (const KeyRecord& r : history_of(key)) {
    if (starts_with(r.what, "cancelled: ") && !r.what.ends_with("[claimed]")) cancelled_unclaimed = true;
    if (starts_with(r.what, "granted, answer lost: process stopped")) claimed_by_the_killed = true;
    if (starts_with(r.what, "skip already-claimed") || starts_with(r.what, "skip clock-skew")) continue;
    if (starts_with(r.what, "skip ")) reported.push_back({&r, "skipped"});
    if (starts_with(r.what, "cancelled: ") && r.what.ends_with("[claimed]")) reported.push_back({&r, "cancelled"});
    if (starts_with(r.what, "rejected")) reported.push_back({&r, "skipped"});
  }
  auto id_of = [&](const KeyRecord& r) { return sim_replica_id(r.replica, r.incarnation); };
  const std::vector<const MissedRange*> late = late_ranges_of(key, passed);
  if (record != nullptr && record->fate == FireFate::missed) {
    judge_late_miss_record(key, late, reported, *record);
    return;
  }
  if (record != nullptr && record->fate == FireFate::lost) {
    // Its runner listed it as running, but the simulated process was
    // paused or killed as its job started (it ran nothing): the report is
    // judged by P6; the record must be that report's.
    const bool reported_lost = std::any_of(outcome_.lost_reports.begin(), outcome_.lost_reports.end(), [&](const auto& l) {
      return l.fire_key == key && l.runner_id == record->replica_id;
    });
    if (reported_lost) {
      ++report_.ledger["lost (its runner was stopped as its job started)"];
      return;
    }
  }
  if (record != nullptr) {
    const bool matches = std::any_of(reported.begin(), reported.end(), [&](const Reported& r) {
      if (id_of(*r.what) != record->replica_id || r.fate != to_string(record->fate)) return false;
      return record->fate != FireFate::skipped || starts_with(r.what->what, "skip " + record->reason) ||
             (record->reason == "queue-full" && starts_with(r.what->what, "rejected"));
    });
    if (!matches) {
      violate("P5 ledger", key,
              fmt::format("nobody ran it, and the ledger says {} {} by {}, which no replica reported", to_string(record->fate),
                          record->reason, record->replica_id));
      return;
    }
    ++report_.ledger[fmt::format("{} {}", to_string(record->fate), record->reason)];
    return;
  }
  for (const Reported& r : reported) {
    if (!queue_lost_after(r.what->incarnation, r.what->at)) {
      violate("P5 ledger", key,
              fmt::format("nobody ran it, r{}/i{} reported \"{}\", and the ledger has no record", r.what->replica,
                          r.what->incarnation, r.what->what));
      return;
    }
  }
  for (const MissedRange* m : late) {
    // Each late range records its newest 1,000 instants (all of a smaller one).
    if (m->missed < missed_count_limit && !queue_lost_after(m->incarnation, m->at)) {
      violate("P5 ledger", key,
              fmt::format("nobody ran it, r{}/i{} reported it missed, and the ledger has no record", m->replica,
                          m->incarnation));
      return;
    }
  }
  if (!reported.empty()) ++report_.ledger["no record: its reporter was killed, or its writer dropped it, before writing it"];
  else if (passed.empty()) ++report_.ledger["no record: no replica running"];
  else if (claimed_by_the_killed) ++report_.ledger["no record: claimed by a replica killed before its job started"];
  else if (!late.empty()) ++report_.ledger["no record: missed in a late range beyond its 1,000 newest, or reporter killed"];
  else if (cancelled_unclaimed) ++report_.ledger["no record: cancelled before it was claimed, run by none"];
  else ++report_.ledger["no record: only already-claimed or clock-skew reported"];
}

// A replica's own late loop wrote it (rank 0): one of the ranges reported
// of this instant, and no live replica's skip, which would outrank it.
void Checker::judge_late_miss_record(const std::string& key, const std::vector<const MissedRange*>& late,
                                     const std::vector<Reported>& reported, const FireRecord& record) {
  const bool matches = std::any_of(late.begin(), late.end(), [&](const MissedRange* m) {
    return sim_replica_id(m->replica, m->incarnation) == record.replica_id && ledger_rank(record) == 0;
  });
  if (!matches) {
    violate("P5 ledger", key, fmt::format("nobody ran it, and the ledger says missed by {}, whose loop did not miss it",
                                          record.replica_id));
    return;
  }
  for (const Reported& r : reported) {
    // A skip outranks it (but not a follower's not-leader, of equal rank).
    if (starts_with(r.what->what, "skip not-leader") || queue_lost_after(r.what->incarnation, r.what->at)) continue;
    violate("P5 ledger", key,
            fmt::format("the ledger says missed by {}, but r{}/i{} reported \"{}\", which ranks higher", record.replica_id,
                        r.what->replica, r.what->incarnation, r.what->what));
    return;
  }
  ++report_.ledger["missed (a replica's late loop)"];
}

// P4: runs happen only at instants of their schedule (no invented fires).
void Checker::check_runs_are_scheduled() {
  std::unordered_map<std::string, SchedulePtr> schedules;
  for (const SimJob& job : sim_jobs()) {
    ParseOptions parse;
    parse.seconds = SecondsField::optional;
    schedules[job.key] = parse_schedule(job.spec, parse);
  }
  for (const RunRecord& run : outcome_.runs) {
    if (schedules.at(run.entry_key)->next(run.scheduled_at - 1ns) != run.scheduled_at) {
      violate("P4 missed-fire policy", run.fire_key, "ran at an instant that is not in its schedule");
    }
  }
}

// P3 with claims: every run has a fence of its own.
void Checker::check_claim_fences() {
  std::unordered_map<std::uint64_t, const RunRecord*> by_fence;
  for (const RunRecord& run : outcome_.runs) {
    auto [it, fresh] = by_fence.emplace(run.fence, &run);
    if (!fresh) violate("P3 fencing", run.fire_key, fmt::format("fence {} also handed to {}", run.fence, it->second->fire_key));
    if (run.fence == 0) violate("P3 fencing", run.fire_key, "claimed run without a fence");
  }
}

// P3 in leader mode: a term belongs to one incarnation, and terms handed
// to jobs only grow (but across a store wipe).
void Checker::check_terms() {
  std::unordered_map<std::uint64_t, int> holder;  // term -> incarnation
  std::vector<const RunRecord*> ordered;
  for (const RunRecord& run : outcome_.runs) {
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
        !wipe_between(run->at - std::chrono::duration_cast<nanoseconds>(options_.lease_ttl), run->at)) {
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

// P4: missed-fire policies run exactly what they promise.
void Checker::check_missed_plans() {
  for (const MissedRange& m : outcome_.missed) {
    ++report_.missed_plans;
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
}

// A minimal trace of the first violation: the fire's history and the
// faults around it.
// P6: a run is reported lost only when its runner was killed, or paused
// for 2 heartbeats or more (less 1 s of slack for the simulation's steps)
// within the record's life (3 heartbeats) before the report: a runner
// that ran all along beat every heartbeat on the store's clock, whatever
// its own clock says, and one paused for less announces again before its
// record expires (docs/fleet-state.md, "One clock", "Lost runs").
void Checker::check_lost_reports() {
  const nanoseconds heartbeat = std::chrono::duration_cast<nanoseconds>(options_.registry_heartbeat);
  const nanoseconds record_life = 3 * heartbeat;
  const nanoseconds shortest_pause = 2 * heartbeat - std::chrono::seconds{1};
  for (const Outcome::LostReport& report : outcome_.lost_reports) {
    const auto known = outcome_.incarnation_of.find(report.runner_id);
    const int runner = known == outcome_.incarnation_of.end() ? -1 : known->second;
    const auto killed = outcome_.killed.find(runner);
    if (killed != outcome_.killed.end() && killed->second <= report.at) continue;
    // It stopped, but the store failed its withdrawal: its record, and
    // the runs it listed, were left to expire (docs/fleet-state.md).
    const auto left = outcome_.record_left.find(runner);
    if (left != outcome_.record_left.end() && left->second <= report.at) continue;
    // It stopped and withdrew its record, and the store then went back to
    // before the withdrawal: the record, and its runs, came back to expire.
    const auto stopped = outcome_.stopped.find(runner);
    const Outcome::DocumentLoss* undone =
        stopped == outcome_.stopped.end() ? nullptr : undone_between(stopped->second, stopped->second, report.at);
    if (undone != nullptr && undone->lost != nanoseconds::max()) continue;  // a rollback, not a wipe
    const auto pauses = outcome_.pauses.find(runner);
    const bool paused = pauses != outcome_.pauses.end() &&
                        std::any_of(pauses->second.begin(), pauses->second.end(), [&](const auto& pause) {
                          return pause.first <= report.at && pause.second >= report.at - record_life &&
                                 std::min(pause.second, report.at) - pause.first >= shortest_pause;
                        });
    if (paused) continue;
    violate("P6 no live run reported lost", report.fire_key,
            fmt::format("i{} reported it lost at {}, but its runner {} was neither killed nor paused for {} in the {} "
                        "before",
                        report.reporter, ms(report.at), report.runner_id, ms(shortest_pause), ms(record_life)));
  }
}

// P7: a trigger runs exactly once or is reported. One asked for a job no
// replica runs expires with one ledger record; any other runs once, again
// only after the store went back to before its take, and nowhere only if
// its taker died (or stopped) before running it or the store lost it
// before any replica took it.
void Checker::check_triggers() {
  const nanoseconds horizon = options_.duration - 30s;
  for (const Outcome::TriggerAsked& asked : outcome_.triggers) {
    if (asked.answer.empty() || asked.stamps.empty()) continue;  // never sent: the end came first
    if (asked.answer == "unanswered") {
      ++report_.triggers["unanswered: the store could not be reached"];
      continue;
    }
    const nanoseconds last_sent = asked.stamps.back() - sim_epoch();
    if (last_sent + (asked.phantom ? asked.wait + 10s : 0s) > horizon) continue;
    std::vector<const RunRecord*> runs;
    for (const RunRecord& run : outcome_.trigger_runs) {
      if (run.entry_key == asked.job_key &&
          std::find(asked.stamps.begin(), asked.stamps.end(), run.scheduled_at) != asked.stamps.end()) {
        runs.push_back(&run);
      }
    }
    std::vector<const Outcome::TriggerLog*> logs;
    for (const Outcome::TriggerLog& log : outcome_.trigger_logs) {
      if (log.id == asked.id) logs.push_back(&log);
    }
    if (asked.phantom) {
      judge_phantom_trigger(asked, runs, logs);
    } else {
      judge_trigger(asked, runs, logs);
    }
  }
}

namespace {

std::string describe(const std::vector<const Outcome::TriggerLog*>& logs) {
  std::string text;
  for (const auto* log : logs) text += fmt::format(" [{} i{} {}]", ms(log->at), log->incarnation, log->what);
  return text.empty() ? " none" : text;
}

}  // namespace

void Checker::judge_trigger(const Outcome::TriggerAsked& asked, const std::vector<const RunRecord*>& runs,
                            const std::vector<const Outcome::TriggerLog*>& logs) {
  const nanoseconds first_sent = asked.stamps.front() - sim_epoch();
  const Outcome::TriggerLog* first_take = nullptr;
  for (const auto* log : logs) {
    if (log->what == "taken" && (first_take == nullptr || log->at < first_take->at)) first_take = log;
  }
  if (runs.size() == 1) {
    ++report_.triggers["ran once"];
    return;
  }
  if (runs.empty()) {
    std::vector<const KeyRecord*> fates;  // what became of its manual fire (cancelled, rejected…)
    for (const Instant stamp : asked.stamps) {
      for (const KeyRecord& r : history_of(fire_key(asked.job_key, stamp))) fates.push_back(&r);
    }
    // Its taker was killed before running it, or cancelled it (a stop that
    // did not drain), or logged it not run (queue full, stopping).
    const bool taker_gone = std::any_of(logs.begin(), logs.end(), [&](const auto* log) {
      if (log->what == "not run") return true;
      if (log->what != "taken") return false;
      return killed_after(log->incarnation, log->at) || std::any_of(fates.begin(), fates.end(), [&](const KeyRecord* r) {
               return r->incarnation == log->incarnation && starts_with(r->what, "cancelled");
             });
    });
    if (taker_gone) {
      ++report_.triggers["not run: its taker was killed, or stopped and cancelled it, first"];
    } else if (undone_between(first_sent, first_sent, first_take ? first_take->at : expiry_of(asked))) {
      ++report_.triggers["not run: the store lost it before a replica took it"];
    } else {
      std::string text;
      for (const KeyRecord* r : fates) text += fmt::format(" [{} i{} {}]", ms(r->at), r->incarnation, r->what);
      violate("P7 trigger", asked.job_key + "#trigger-" + asked.id,
              fmt::format("asked at {} (answered {}), never ran; the replicas logged:{}; its fire:{}", ms(first_sent),
                          asked.answer, describe(logs), text.empty() ? " nothing" : text));
    }
    return;
  }
  for (std::size_t i = 1; i < runs.size(); ++i) {
    if (first_take != nullptr && undone_between(first_take->at, first_take->at, runs[i]->at)) continue;
    violate("P7 trigger", asked.job_key + "#trigger-" + asked.id,
            fmt::format("asked at {}, ran {} times (r{}/i{} at {} again) with no store going back to before its take; "
                        "the replicas logged:{}",
                        ms(first_sent), runs.size(), runs[i]->replica, runs[i]->incarnation, ms(runs[i]->at),
                        describe(logs)));
    return;
  }
  ++report_.triggers["ran again: the store went back to before its take"];
}

void Checker::judge_phantom_trigger(const Outcome::TriggerAsked& asked, const std::vector<const RunRecord*>& runs,
                                    const std::vector<const Outcome::TriggerLog*>& logs) {
  const std::string key = asked.job_key + "#trigger-" + asked.id;
  const nanoseconds first_sent = asked.stamps.front() - sim_epoch();
  if (!runs.empty()) {
    violate("P7 trigger", key, fmt::format("asked for a job no replica runs, yet r{}/i{} ran it", runs.front()->replica,
                                           runs.front()->incarnation));
    return;
  }
  std::vector<const Outcome::TriggerLog*> expiries;  // a drop that lost its answer may report it again: allowed
  for (const auto* log : logs) {
    if (log->what == "expired") expiries.push_back(log);
  }
  const bool unanswered = std::any_of(logs.begin(), logs.end(), [](const auto* log) {
    return log->what == "expired (drop's answer lost)";
  });
  for (std::size_t i = 1; i < expiries.size(); ++i) {
    if (undone_between(expiries[i - 1]->at, expiries[i - 1]->at, expiries[i]->at)) continue;
    violate("P7 trigger", key, fmt::format("expired, reported by more than one replica:{}", describe(expiries)));
    return;
  }
  const FireRecord* record = nullptr;
  for (const Instant stamp : asked.stamps) {
    const auto it = outcome_.ledger.find(fire_key(asked.job_key, stamp) + "#trigger-" + asked.id);
    if (it != outcome_.ledger.end()) record = &it->second;
  }
  if (record != nullptr) {
    if (record->fate != FireFate::skipped || record->reason != "trigger-expired") {
      violate("P7 trigger", key, fmt::format("the ledger says {} {}, not skipped trigger-expired", to_string(record->fate),
                                             record->reason));
      return;
    }
    ++report_.triggers["expired untaken, recorded"];
    return;
  }
  const bool reported = !expiries.empty() || unanswered;
  if (std::any_of(logs.begin(), logs.end(), [&](const auto* log) {
        return log->what.starts_with("expired") && queue_lost_after(log->incarnation, log->at);
      })) {
    ++report_.triggers["expired untaken; its reporter was killed, or its writer dropped it, before writing the record"];
  } else if (!reported && undone_between(first_sent, first_sent, expiry_of(asked) + 2s)) {
    ++report_.triggers["expired untaken; the store lost it before it expired"];
  } else {
    violate("P7 trigger", key, fmt::format("asked at {} for a job no replica runs, and the ledger has no record of its "
                                           "expiry; the replicas logged:{}",
                                           ms(first_sent), describe(logs)));
  }
}

// P8: a wipe never blinds the catalogue for long: two heartbeats after it,
// every job is listed again (unless the store was down or went back again
// in between, or no replica ran throughout).
void Checker::check_catalogue() {
  for (const Outcome::CatalogueProbe& probe : outcome_.catalogue_probes) {
    if (probe.listed == sim_jobs().size()) {
      ++report_.catalogue["complete two heartbeats after a wipe"];
    } else if (!probe.excuse.empty()) {
      ++report_.catalogue["incomplete, excused: " + probe.excuse];
    } else {
      violate("P8 catalogue", "",
              fmt::format("{} after the wipe at {}, the catalogue listed {} of {} jobs", ms(probe.at - probe.wiped),
                          ms(probe.wiped), probe.listed, sim_jobs().size()));
    }
  }
}

void Checker::write_trace() {
  const Violation& v = report_.violations.front();
  std::string trace = fmt::format("first violation: {} — {}: {}\nhistory of {}:\n", v.property, v.fire_key, v.detail,
                                  v.fire_key.empty() ? "-" : v.fire_key);
  nanoseconds center{0};
  for (const KeyRecord& r : history_of(v.fire_key)) {
    trace += fmt::format("  {:>10}  r{}/i{}  {}\n", ms(r.at), r.replica, r.incarnation, r.what);
    center = r.at;
  }
  if (auto it = runs_by_key_.find(v.fire_key); it != runs_by_key_.end()) center = it->second.front()->at;
  for (const Outcome::TriggerAsked& asked : outcome_.triggers) {
    if (v.fire_key == asked.job_key + "#trigger-" + asked.id && !asked.stamps.empty()) {
      center = asked.stamps.front() - sim_epoch();
    }
  }
  if (const auto at = v.fire_key.rfind('@'); at != std::string::npos && center == nanoseconds{0}) {
    center = parse_rfc3339(std::string_view(v.fire_key).substr(at + 1)) - sim_epoch();
  }
  trace += fmt::format("faults within ±{} of {}:\n", ms(2 * options_.claim_ttl), ms(center));
  for (const auto& [when, what] : outcome_.faults) {
    if (when >= center - 2 * options_.claim_ttl && when <= center + 2 * options_.claim_ttl) {
      trace += fmt::format("  {:>10}  {}\n", ms(when), what);
    }
  }
  report_.trace = std::move(trace);
}

}  // namespace

Report check(const SimOptions& options, const Outcome& outcome) { return Checker(options, outcome).run(); }

std::string summary(const SimOptions& options, const Report& report) {
  std::string lost;
  std::uint64_t total = 0;
  for (const auto& [why, n] : report.lost) {
    lost += fmt::format("{}{}: {}", lost.empty() ? "" : ", ", why, n);
    total += n;
  }
  std::string ledger;
  for (const auto& [what, n] : report.ledger) ledger += fmt::format("{}{}: {}", ledger.empty() ? "" : ", ", what, n);
  for (const auto& [what, n] : report.triggers) ledger += fmt::format("; trigger {}: {}", what, n);
  for (const auto& [what, n] : report.catalogue) ledger += fmt::format("; catalogue {}: {}", what, n);
  return fmt::format("seed {} {}: {} fires due, {} runs, {} lost ({}), {} duplicates after store loss, {} at leader handover, {} missed plans, {} violations{}",
                     options.seed, mode_name(options.mode), report.fires_due, report.runs, total,
                     lost.empty() ? "none" : lost, report.duplicates_after_store_loss, report.duplicates_at_handover, report.missed_plans,
                     report.violations.size(), options.ledger ? "; ledger: " + (ledger.empty() ? std::string("empty") : ledger) : "");
}

}  // namespace fleetcron::sim
