// Internal: a run in progress, as stop(), remove(), timeouts and leadership
// loss reach it, and the overlap slot it holds.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>

#include "core/scheduler/entry.h"

namespace fleetcron::detail {

/// An entry's overlap slot, held from the overlap check to the end of the
/// run: releasing it lets a queued fire of the entry go on.
class OverlapSlot {
 public:
  OverlapSlot() = default;
  OverlapSlot(const OverlapSlot&) = delete;
  OverlapSlot& operator=(const OverlapSlot&) = delete;
  ~OverlapSlot() { release(); }
  void hold(OverlapState& state) { state_ = &state; }
  void release();

 private:
  OverlapState* state_ = nullptr;
};

/// A run in progress, on its worker's stack from registration to its end:
/// what stop(), remove(), timeouts and leadership loss need to reach it.
struct Run {
  std::stop_source stop;
  EntryId entry_id = 0;
  bool leader_gated = false;  // leader_gated and term: guarded by the worker's slot mutex
  std::uint64_t term = 0;
  // The job's context and start, once it starts (with a replica registry,
  // which lists the runs in progress): guarded by the worker's slot mutex.
  const FireContext* context = nullptr;
  Instant started_at{};
  // Not listed by the heartbeats until the fleet-wide overlap check wrote
  // it into this replica's record (fleet_overlap.cpp): slot mutex.
  bool awaiting_fleet = false;
  // Listed alone (fleet-wide overlap): heartbeats list it first, so that a
  // record cut to its size limit keeps it (slot mutex).
  bool alone = false;
  std::atomic<bool> timed_out{false};          // the run's timeout fired
  std::atomic<bool> attempt_timed_out{false};  // the current attempt's timeout fired

  /// The run's two deadlines: its timeout and the current attempt's.
  enum class Deadline : std::uint8_t { run, attempt };
  /// The current attempt's own stop source, when the entry has an attempt
  /// timeout (guarded by RunsInProgress::mutex_: the watchdog requests it).
  std::stop_source attempt_stop{std::nostopstate};
  // Each deadline's item in the watchdog's queue (RunsInProgress::mutex_), until it
  // takes it or the run withdraws it; `registered`: the run's thread only.
  std::array<std::optional<Clock::SteadyTime>, 2> deadline_at;
  std::array<bool, 2> registered{false, false};
};

/// An item of the watchdog's queue.
struct Timeout {
  Run* run = nullptr;
  Run::Deadline deadline = Run::Deadline::run;
};

/// Where a worker registers the run it executes: one slot per worker, so
/// registering takes no lock another worker takes for its own runs.
struct WorkerSlot {
  std::mutex mutex;  // guards run, and the run's leader_gated and term
  Run* run = nullptr;
};

}  // namespace fleetcron::detail
