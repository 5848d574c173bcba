// Internal: a fire on its way from the loop to a worker, and what the claim
// path decides for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/scheduler/entry.h"

namespace fleetcron::detail {

class OverlapSlot;

/// Where trigger_and_wait() receives its run's outcome.
struct OutcomeSlot {
  std::mutex mutex;  // guards value
  std::condition_variable cv;
  std::optional<RunOutcome> value;
  void set(RunOutcome outcome) {
    std::lock_guard guard(mutex);
    value = std::move(outcome);
    cv.notify_all();
  }
};

/// What lets an automatic fire run on this replica: the elector's term
/// (leader-gated) and the claimer's fence.
struct Grant {
  bool leader_gated = false;  // an elector said leader
  std::uint64_t term = 0;
  std::uint64_t fence = 0;
};

/// The elector's answer for the fires due now: a grant to build on, or the
/// reason they are skipped.
struct Election {
  std::optional<SkipReason> refused;
  std::string error;
  Grant grant;
};

/// Where a fire is on the claim path (ClaimPath).
enum class FireState : std::uint8_t {
  queued,    // not decided yet
  claiming,  // screened: its claimer is asked next
  granted,   // may run; `grant` holds the term and fence
  dropped,   // skipped or cancelled, and reported
};

/// Why a fire exists: what decides whether it is claimed, screened for
/// staleness and overlap, moves the cursor, and how it is recorded.
enum class FireKind : std::uint8_t {
  automatic,  // its schedule came due: the claim path decides it
  manual,     // a trigger (here or fleet-wide): runs regardless of pause and claims
  catch_up,   // an instant the fleet missed (catch_up.cpp): older than the dedup window by design, the cursor already past it
  recovery,   // a re-run of a lost run (lost_runs.cpp): claimed under recovery_fire_key(), whatever its age
};

/// A fire waiting for, or held by, a worker.
struct Fire {
  std::shared_ptr<Entry> entry;
  Instant scheduled_at;
  FireKind kind = FireKind::automatic;
  std::shared_ptr<OutcomeSlot> outcome = nullptr;  // trigger_and_wait only
  bool reserved = false;  // granted by another worker's claim batch, queued with a worker reserved for it
  /// How often a fire is looked at, at most: while the other replicas
  /// still claim the fires ahead, a look finds it free.
  static constexpr std::uint8_t max_looks = 4;
  std::uint8_t looks = 0;  // times looked at behind a claim batch (RunQueue), not claimed elsewhere then
  FireState state = FireState::queued;
  Grant grant = {};
  /// The catch-up's later instants of an entry that limits overlap,
  /// queued one by one as each run ends (execute()).
  std::shared_ptr<std::deque<Fire>> chain = nullptr;
  /// A recovery's: how many times the fire was re-run (1 the first time),
  /// and the lost run's fence; 0 for every other kind.
  int recovery = 0;
  std::uint64_t recovered_fence = 0;
  /// The replica's overlap slot this fire holds from before its claim
  /// (run.cpp, pass_overlap()): a skip frees it before it is reported, so
  /// whoever sees the skip finds the slot free.
  OverlapSlot* overlap_held = nullptr;

  [[nodiscard]] bool manual() const { return kind == FireKind::manual; }
  [[nodiscard]] bool catch_up() const { return kind == FireKind::catch_up; }
};

}  // namespace fleetcron::detail
