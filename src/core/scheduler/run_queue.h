// Internal: the run queue — fires waiting for a worker, the workers busy,
// and the workers reserved for the fires a claim batch decided. One lock
// guards all of it; no other scheduler lock is taken under it, and nothing
// calls out under it but the batch rule (a fire's claimer and age) and the
// Clock's wait.
//
// A worker takes the front fire and, when the rule allows, the fires due
// with it that share its claimer (a claim batch), each reserving a worker
// of its own: a claimed fire must start at once, not wait behind jobs,
// where its claim could expire or be lost with this process. The granted
// ones come back at the front, each bringing its reserved worker. When
// the free workers cut a batch short, the fires behind it that would have
// joined are taken to be looked at (Claimer::already_claimed()), at most
// Fire::max_looks times each, reserving nothing: those claimed elsewhere
// are dropped, the others come back behind the granted ones, in order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "core/scheduler/fire.h"
#include "core/scheduler/fire_queue.h"
#include "fleetcron/clock.h"
#include "fleetcron/events.h"

namespace fleetcron::detail {

class RunQueue {
 public:
  /// Which fires may share a claim round trip: `starts(first)` for the
  /// one a worker took, `joins(first, next)` for each one after it.
  struct BatchRule {
    std::function<bool(const Fire& first)> starts;
    std::function<bool(const Fire& first, const Fire& next)> joins;
    std::size_t limit = 1;  // fires decided together at most, the first included
    /// Whether the first's claimer can look at the fires behind a batch
    /// the free workers cut (at most `limit` of them); null: no.
    std::function<bool(const Fire& first)> looks;
  };

  RunQueue(std::size_t workers, std::size_t max_queued, BatchRule rule);

  struct Pushed {
    std::size_t added = 0, queued = 0, running = 0;
    bool closed = false;  // every fire was refused: the queue is closed
  };
  /// Queues `fires` while there is room; those refused (the queue full, or
  /// closed) are left in `fires`, in order.
  Pushed push(std::vector<Fire>& fires);

  /// A worker's wait for work: the front fire, in `batch` the fires that
  /// join its claim round trip, and in `looked` those to look at behind
  /// it. False once the queue is closed and empty: the worker leaves.
  bool take(Fire& fire, std::vector<Fire>& batch, std::vector<Fire>& looked);
  /// The worker's fire ended (`ran`: it held a worker; a batch that
  /// granted nothing gave its worker back in put_back()).
  void done(bool ran);
  /// Gives back `count` of the workers a batch reserved.
  void release(std::size_t count);
  /// A decided batch: `taken` fires came out with the worker's; `granted`
  /// (each keeping its reserved worker) go back to the front, then
  /// `unclaimed` (looked at, not claimed elsewhere); `runs`: the worker
  /// runs its own fire (else its worker is free).
  void put_back(std::vector<Fire>& granted, std::vector<Fire>& unclaimed, std::size_t taken, bool runs);

  /// Fires queued (those out for a decision included, as push() counts
  /// them) and workers deciding or running one, now.
  QueueDepthEvent depth() const;

  /// No new fires; workers leave once the queue is empty.
  void close();
  /// Waits until nothing is queued, held in a batch or running but
  /// `self` workers (the caller's own, when a job stops the scheduler),
  /// or until `deadline`; true if so.
  bool wait_finished(std::size_t self, Clock& clock, Clock::SteadyTime deadline);
  /// Takes every fire still queued (their reservations given back).
  std::vector<Fire> take_all();

 private:
  bool can_take_locked() const;
  void take_batch_locked(const Fire& first, std::vector<Fire>& batch, std::vector<Fire>& looked);
  bool finished_locked(std::size_t self) const;

  const std::size_t workers_;
  const std::size_t max_queued_;
  const BatchRule rule_;
  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable work_cv_;  // workers wait for fires
  std::condition_variable idle_cv_;  // stop and drain wait for workers
  FireQueue queue_;
  std::size_t running_ = 0;  // workers deciding or running a fire
  std::size_t held_ = 0;     // fires out of the queue in a claim batch, about to be put back
  // Workers deciding or running a fire, plus one reserved for each fire a
  // claim batch took (put back granted, Fire::reserved): never more than
  // the workers, so every claimed fire starts at once.
  std::size_t committed_ = 0;
  bool closed_ = false;
};

}  // namespace fleetcron::detail
