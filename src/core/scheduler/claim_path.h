// Internal: the claim path — whether an automatic fire runs on this replica.
// Every one passes through screen() and claim(), alone (a batch of one) or
// in a claim batch; any backend error skips the fire (fail closed). A
// component of the scheduler that sees it through a narrow Host.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "core/scheduler/fire.h"
#include "core/scheduler/leader_fitness.h"
#include "core/scheduler/runs_in_progress.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/events.h"

namespace fleetcron::detail {

class ClaimPath {
 public:
  /// What the claim path needs from the scheduler.
  class Host {
   public:
    /// Why coordinated fires are refused here ("" when they are not).
    [[nodiscard]] virtual std::string settings_refusal() = 0;
    /// Empty when the fire's entry is caught up (catching it up first if it
    /// is not); otherwise why the fire must not be claimed yet.
    [[nodiscard]] virtual std::string catch_up_pending(const Fire& fire) = 0;
    /// A fire skipped with no lease held here: its entry's catch-up reaches it.
    virtual void note_unled(const Fire& fire) = 0;
    /// Reports the fire skipped (a SkippedFireEvent, a log line), once.
    virtual void report_skip(const Fire& fire, SkipReason reason, std::string error) = 0;
    /// Reports the fire cancelled (a CancelledFireEvent), once.
    virtual void report_cancel(const Fire& fire, std::string cause, CancelReason reason) = 0;
    virtual void publish(Event event) = 0;
    virtual void log(LogLevel level, const std::string& message) = 0;

   protected:
    ~Host() = default;
  };

  struct Settings {
    std::shared_ptr<Elector> elector;     // null: no leader-gated fires
    bool catch_up_beyond_dedup_window;    // FleetOptions::catch_up_beyond_dedup_window
    bool log_events;                      // SchedulerOptions::log_events
  };

  /// `fitness` and `runs` are the scheduler's, and outlive this.
  ClaimPath(Host& host, Settings settings, std::shared_ptr<Clock> clock, LeaderFitness& fitness,
            const RunsInProgress& runs);

  /// Asks the elector, if any (refused while stepped down).
  [[nodiscard]] Election elect();
  /// The first step: drops (and reports) the fires that must not be
  /// claimed — refused by `election`, of a lost term, of a removed or
  /// paused entry, the scheduler stopping, older than the dedup window.
  /// The others become `claiming`, or `granted` when they have no claimer.
  void screen(std::span<Fire> fires, const Election& election);
  /// The second step: one claim round trip for the `claiming` fires (all
  /// of one claimer); each becomes `granted` with its fence, or `dropped`.
  /// A throw or a wrong number of answers fails every one.
  void claim(std::span<Fire> fires);
  /// Asks the claimer of `fires` (queued, all of one claimer) which are
  /// claimed already, in one round trip, and drops (skipped,
  /// already_claimed) those that are; an answer that tells nothing, or a
  /// failure, leaves them all to be claimed as usual.
  void drop_claimed_elsewhere(std::span<Fire> fires);
  /// Empty if the elector still says leader of `granted.term` (or the fire
  /// was not leader-gated); otherwise why the fire must be skipped.
  [[nodiscard]] std::string leadership_changed(const Grant& granted);
  /// Why the fire is already too old to claim (older than its claimer's
  /// dedup window); empty if it is not, or has no claimer.
  [[nodiscard]] std::string staleness_now(const Fire& fire) const;
  /// Whether the fire is a catch-up's that may be older than the dedup
  /// window, or a lost run's re-run (claimed once under its own key).
  [[nodiscard]] bool beyond_window(const Fire& fire) const;
  /// The key its claimer is asked for: the fire key, and "#recover<n>" for
  /// the n-th re-run of a lost run.
  [[nodiscard]] static std::string claim_key(const Fire& fire);
  /// Whether a claimer granted the fire to this replica.
  [[nodiscard]] static bool claimed(const Fire& fire);

 private:
  /// Tracks the answers to leader-gated claims (both mode) in the fitness;
  /// reports a step-down when errors and clock-skew refusals last
  /// LeaderFitness::claim_failure_step_down.
  void note_leader_claim(const ClaimResult& claim);

  Host& host_;
  const Settings settings_;
  std::shared_ptr<Clock> clock_;
  LeaderFitness& fitness_;
  const RunsInProgress& runs_;
};

}  // namespace fleetcron::detail
