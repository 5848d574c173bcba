// The deterministic fleet simulator: N real fleetcron::Scheduler replicas in
// one process, each on its own VirtualClock, against a model of the
// coordination store (claims with a TTL and a fence counter; a lease with
// terms), with faults drawn from one seed. See docs/reliability.md.
//
// How it stays deterministic although every Scheduler has threads: time
// moves only when the whole fleet is quiescent (every fire a replica's loop
// produced is decided, or parked in a store request), and the store answers
// requests only then, in an order and with faults that are pure functions of
// (seed, fire key, replica incarnation, round) — never of thread timing or
// of how the scheduler happened to batch its claims. (One exception: when
// the fires waiting on the store hold all of a replica's workers with more
// fires queued, which fires made this round depends on timing; see
// quiescent_locked().)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "fleetcron/fleetcron.h"

namespace fleetcron::sim {

/// claim: a claimer only; leader: an elector only; both: an elector and a
/// claimer on every replica (the daemon's --coordination both).
enum class Mode { claim, leader, both };
[[nodiscard]] inline bool uses_claims(Mode mode) noexcept { return mode != Mode::leader; }
[[nodiscard]] inline bool uses_leader(Mode mode) noexcept { return mode != Mode::claim; }
[[nodiscard]] inline const char* mode_name(Mode mode) noexcept {
  return mode == Mode::claim ? "claim" : mode == Mode::leader ? "leader" : "both";
}

/// How often faults happen. "every" values are mean intervals of simulated
/// time per replica (or for the store); 0 switches the fault off.
struct FaultPlan {
  std::chrono::seconds crash_every{600};            ///< SIGKILL; restart after 1 s .. 2 claim TTLs
  double restart_with_record = 0.5;                 ///< the restarted replica knows its last runs
  std::chrono::seconds graceful_restart_every{1800};  ///< SIGTERM: resign, restart
  std::chrono::seconds pause_every{900};            ///< stop-the-world, 1 s .. 1.5 claim TTLs
  std::chrono::seconds store_restart_every{1800};   ///< the store loses every key
  std::chrono::seconds store_rollback_every{1800};  ///< failover to a replica 0.1 .. 3 s behind
  std::chrono::seconds store_outage_every{1200};    ///< every request fails, 1 .. 30 s
  double request_error = 0.002;                     ///< per fire key and replica
  double round_timeout = 0.002;                     ///< a replica's round times out (half applied first)
  double round_slow = 0.02;                         ///< answered after 0 .. 2 s
  double round_very_slow = 0.001;                   ///< answered after up to 2 claim TTLs
  std::chrono::seconds max_clock_offset{5};         ///< each replica: uniform in ±this
  double skewed_replica = 0.2;                      ///< a seed puts replica 0 beyond the skew guard
  double guard_edges = 0.2;                         ///< a seed puts replicas 1 and 2 just inside it, at opposite ends
  double max_drift_ppm = 300;                       ///< each replica: uniform in ±this
  // With SimOptions::ledger (the fleet state):
  double fleet_request_error = 0.005;  ///< a fleet-state call fails unapplied (per call)
  double fleet_reply_lost = 0.01;      ///< a fleet-state write applies, its answer is lost (per write)
  std::chrono::seconds trigger_every{45};  ///< the operator asks for a trigger (every 5th for a job no replica runs)
};

struct SimOptions {
  std::uint64_t seed = 1;
  Mode mode = Mode::claim;
  int replicas = 3;
  std::chrono::seconds duration{900};
  FaultPlan faults;
  /// The store's claim TTL and the claimers' skew guard (scaled down from
  /// the Redis defaults of 10 min and TTL/4 so that expiry matters); the
  /// claimers' dedup window is claim_ttl - 2 * max_clock_skew, as Redis's.
  std::chrono::seconds claim_ttl{60};
  std::chrono::seconds max_clock_skew{15};
  /// The lease (Redis elector semantics: renew at TTL/3, followers poll).
  std::chrono::seconds lease_ttl{10};
  std::chrono::milliseconds follower_poll{500};
  std::chrono::seconds renew_margin{1};
  std::chrono::seconds command_timeout{2};
  std::chrono::seconds missed_tolerance{5};
  /// Test hook: a store that forgets claims after 1 s (the checker must
  /// catch the duplicates this causes).
  bool broken_store = false;
  /// Test hook: overrides the claimers' dedup window; nanoseconds::max()
  /// brings back the duplicates the simulator found first.
  std::optional<std::chrono::nanoseconds> dedup_window;
  /// Test hook: a store without the reset rule (no epoch record): the
  /// repeats after wipes and rollbacks come back.
  bool without_reset_rule = false;
  /// Gives the fleet a fleet state (docs/fleet-state.md) on the store's
  /// clock: the run ledger, the replica registry (a heartbeat every
  /// `registry_heartbeat`), the controls (polled every second; an operator
  /// asks for triggers) and the job catalogue; not cursors. A killed
  /// replica's calls fail from the kill on, so its ledger queue is lost and
  /// its registry record expires, as with SIGKILL. The store's faults reach
  /// it: outages fail every call, calls fail or lose their answers
  /// (fleet_request_error, fleet_reply_lost), and wipes and rollbacks take
  /// the documents (controls, registry, catalogue) with the claims; the
  /// ledger keeps its records across them (a wipe's lost history would
  /// leave the checker nothing to judge). The checker then judges every
  /// instant's ledger record, every trigger and the catalogue after each
  /// wipe. At most 2 hours (a job's ledger keeps 10,000 records).
  bool ledger = false;
  std::chrono::seconds registry_heartbeat{5};
};

/// The replica id an incarnation announces in the fleet state.
[[nodiscard]] std::string sim_replica_id(int replica, int incarnation);

/// One thing that happened to a fire key, as the checker sees it.
struct KeyRecord {
  std::chrono::nanoseconds at{0};  ///< simulated time since the start
  int replica = 0;
  int incarnation = 0;
  std::string what;  ///< "run fence=N", "skip already-claimed", "granted", "reply-lost", …
};

struct RunRecord {
  std::string entry_key;
  Instant scheduled_at;
  std::string fire_key;
  int replica = 0;
  int incarnation = 0;
  std::uint64_t fence = 0;
  std::chrono::nanoseconds at{0};
};

/// What one incarnation of a replica decided about its instants: the ranges
/// its loop passed (fires in them were either decided or covered by a
/// missed-fire plan).
struct MissedRange {
  int replica = 0;
  int incarnation = 0;
  std::string entry_key;
  Instant first;
  Instant last;
  std::uint64_t missed = 0;
  std::uint64_t runs = 0;
  MissedFirePolicy policy = MissedFirePolicy::run_once;
  std::chrono::nanoseconds at{0};  ///< simulated time it was reported
};

struct Outcome {
  std::vector<RunRecord> runs;
  std::map<std::string, std::vector<KeyRecord>> by_key;  ///< every fire key's history
  std::vector<MissedRange> missed;
  std::vector<std::pair<std::chrono::nanoseconds, std::string>> faults;  ///< the fault trace
  /// Instants each incarnation's loop passed, per entry: [from, to].
  struct Span {
    int replica = 0;
    int incarnation = 0;
    std::string entry_key;
    Instant from;
    Instant to;
  };
  std::vector<Span> spans;
  /// Store wipes and rollbacks (simulated time), for explaining duplicates
  /// in leader mode (claims refuse to repeat across them).
  std::vector<std::chrono::nanoseconds> wipes;
  /// SIGKILLs: incarnation -> when (simulated time).
  std::map<int, std::chrono::nanoseconds> killed;
  /// Stop-the-world pauses (SIGSTOP): incarnation -> [from, to) each, in
  /// simulated time (`to` is max while still paused at the end).
  std::map<int, std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>>> pauses;
  /// With SimOptions::ledger: each LostFireEvent (the reporter, the runner
  /// it names and when), judged against the runner's kills and pauses.
  struct LostReport {
    int reporter = 0;  ///< incarnation
    std::string runner_id;
    std::string fire_key;
    std::chrono::nanoseconds at{0};
  };
  std::vector<LostReport> lost_reports;
  std::map<std::string, int> incarnation_of;  ///< replica id -> incarnation
  /// Incarnations whose ledger writer said it lost records (a stop whose
  /// last write failed, a full queue): incarnation -> when, the latest.
  std::map<int, std::chrono::nanoseconds> ledger_dropped;
  /// Incarnations that stopped leaving their registry record behind (the
  /// store failed their withdrawal): incarnation -> when.
  std::map<int, std::chrono::nanoseconds> record_left;
  /// Graceful stops (SIGTERM): incarnation -> when.
  std::map<int, std::chrono::nanoseconds> stopped;
  /// Store outages: [from, to) each.
  std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> outages;
  /// With SimOptions::ledger: when the store's documents went back, and by
  /// how much (a wipe: nanoseconds::max()): writes within `lost` before
  /// `at` are undone.
  struct DocumentLoss {
    std::chrono::nanoseconds at{0};
    std::chrono::nanoseconds lost{0};
  };
  std::vector<DocumentLoss> document_losses;
  /// With SimOptions::ledger: each trigger the operator asked for (sent
  /// again with its request id until answered), and its stamps (the
  /// `requested_at` of each send: the one the store applied is the run's
  /// scheduled instant).
  struct TriggerAsked {
    std::string job_key;
    std::string id;
    bool phantom = false;  ///< a job no replica runs: it must expire, recorded
    std::vector<Instant> stamps;
    std::chrono::nanoseconds wait{0};
    std::chrono::nanoseconds first_sent{0};
    std::string answer;  ///< "changed", "unchanged", or "unanswered" (gave up)
  };
  std::vector<TriggerAsked> triggers;
  /// A manual run (a trigger's): not in `runs`.
  std::vector<RunRecord> trigger_runs;
  /// What the replicas logged about triggers: "taken", "taken (answer
  /// lost)", "not run", "came back, dropped", "expired", "expired (drop's
  /// answer lost)".
  struct TriggerLog {
    int incarnation = 0;
    std::string id;
    std::string what;
    std::chrono::nanoseconds at{0};
  };
  std::vector<TriggerLog> trigger_logs;
  /// With SimOptions::ledger: the catalogue looked at two heartbeats (and
  /// 2 s) after each wipe: how many of the fleet's jobs it listed, and
  /// why a short list is excused (empty: not excused).
  struct CatalogueProbe {
    std::chrono::nanoseconds wiped{0};
    std::chrono::nanoseconds at{0};
    std::size_t listed = 0;
    std::string excuse;
  };
  std::vector<CatalogueProbe> catalogue_probes;
  /// With SimOptions::ledger: each fire key's record in the ledger at the end.
  std::map<std::string, FireRecord> ledger;
  std::uint64_t steps = 0;
  std::uint64_t rounds = 0;
  std::uint64_t requests = 0;
  /// Rounds answered while fires were queued behind workers that all waited
  /// for the store: which fires made such a round depends on thread timing.
  std::uint64_t saturated_rounds = 0;
};

/// The jobs every replica runs: name → cron spec (6 fields) and policy.
struct SimJob {
  std::string key;
  std::string spec;
  MissedFirePolicy missed = MissedFirePolicy::run_once;
  /// How long a run takes on the replica's clock (0: instantaneous); runs
  /// span pauses, crashes and leadership losses, and end on stop.
  std::chrono::nanoseconds duration{0};
  /// Jitter before each fire (claim and both modes only: the scheduler
  /// refuses jitter with an elector and no claimer).
  std::chrono::nanoseconds jitter{0};
};
[[nodiscard]] const std::vector<SimJob>& sim_jobs();

/// Runs one simulation; throws std::runtime_error if the fleet hangs.
[[nodiscard]] Outcome simulate(const SimOptions& options);

/// The simulated start instant (wall time of the store).
[[nodiscard]] Instant sim_epoch();

}  // namespace fleetcron::sim
