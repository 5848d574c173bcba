// Internal: the entries waiting for their catch-up, and the thread that
// catches them up, retrying each failure after a backoff (a component of
// the scheduler with its own state and lock).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "core/scheduler/entry.h"
#include "fleetcron/clock.h"

namespace fleetcron::detail {

class CatchUpQueue {
 public:
  /// One catch-up of the entry; true when nothing is left to retry (done,
  /// or the entry removed). `backoff` is how long a retry waits.
  using Attempt = std::function<bool(const std::shared_ptr<Entry>& entry, std::chrono::nanoseconds backoff)>;

  /// Called before the attempts of the entries due together (at most
  /// max_batch of them), so that their reads can share one round trip.
  using Prefetch = std::function<void(std::span<const std::shared_ptr<Entry>> entries)>;
  static constexpr std::size_t max_batch = 256;

  /// The first retry waits `first_retry`, each next one twice as long, at most `max_retry`.
  CatchUpQueue(std::shared_ptr<Clock> clock, Attempt attempt, std::chrono::nanoseconds first_retry,
               std::chrono::nanoseconds max_retry, Prefetch prefetch = {});
  ~CatchUpQueue();
  CatchUpQueue(const CatchUpQueue&) = delete;
  CatchUpQueue& operator=(const CatchUpQueue&) = delete;

  /// Queues the entry's catch-up, due now (before start(): when it starts).
  void add(const std::shared_ptr<Entry>& entry);
  /// Starts the thread.
  void start();
  /// No attempt starts from here on (one under way ends as it does).
  void stop();
  /// Waits for the thread (after stop()).
  void join();

 private:
  struct Pending {
    std::weak_ptr<Entry> entry;
    std::chrono::nanoseconds backoff;
  };
  void main();
  /// Takes the entries due at `now` (at most max_batch), with lock_ held.
  std::vector<std::pair<Pending, std::shared_ptr<Entry>>> take_due(Clock::SteadyTime now);

  const std::shared_ptr<Clock> clock_;
  const Attempt attempt_;
  const Prefetch prefetch_;
  const std::chrono::nanoseconds first_retry_;
  const std::chrono::nanoseconds max_retry_;
  std::mutex mutex_;  // guards queue_, stopping_; a leaf but for the clock's own lock
  std::condition_variable cv_;
  // By when each is due; those due together in the order they came (a
  // start queues every job: 100,000 of them must not be searched each).
  std::multimap<Clock::SteadyTime, Pending> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fleetcron::detail
