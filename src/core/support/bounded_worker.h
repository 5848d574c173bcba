// Internal, header-only: one thread working through a bounded queue, in
// order — what the scheduler's event bus, the daemon's log and its
// notifier each need. A full queue refuses the item and counts it; the
// producer never waits. The worker learns of each gap where it happened:
// with the first item queued after it, or, when the queue drains before
// one comes, on its own (`on_gap`) — so every gap is told once, promptly,
// and before anything queued after it.
//
// Header-only and used on both sides of the libraries (the daemon links
// the core as a shared library in the release build, where the core's
// internal functions are hidden): nothing here may call into the core.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>


namespace fleetcron::detail {

/// Items refused before the one being handled.
struct RefusedGap {
  std::uint64_t since_previous = 0;  // since the gap told before
  std::uint64_t total = 0;           // since the worker started
};

/// Starts `body` on a thread of its own. Not a lambda of the template's:
/// std::thread's state for a closure inside BoundedWorker<Event> (Event is
/// public) would be exported from a shared libfleetcron-core, whatever the
/// template's visibility; a std::function's is the standard library's own.
inline std::thread start_worker_thread(std::function<void()> body) { return std::thread(std::move(body)); }

template <typename Item>
class BoundedWorker {
 public:
  /// Called on the worker thread for each item, in order. `stop` is
  /// requested when stop()'s deadline passes with this item in flight.
  using Handler = std::function<void(Item& item, RefusedGap gap, std::stop_token stop)>;
  using SteadyTime = std::chrono::steady_clock::time_point;
  /// What stop() does with a thread still in a handler at the deadline.
  enum class Stuck {
    join,    // waits for it (a handler that honours `stop` ends soon)
    detach,  // leaves it behind (a write the process cannot interrupt); the handler and queue outlive this object
  };

  /// A gap told on its own: the queue drained with no item after it.
  using GapHandler = std::function<void(RefusedGap gap)>;

  /// `capacity` items wait at most (at least one). Without `on_gap`, a gap
  /// is told only with the next item.
  BoundedWorker(std::size_t capacity, Handler handler, GapHandler on_gap = {})
      : state_(std::make_shared<State>(capacity == 0 ? 1 : capacity, std::move(handler), std::move(on_gap))) {
    thread_ = start_worker_thread([state = state_] { state->run(); });
  }
  /// Handles everything queued, then joins.
  ~BoundedWorker() { (void)stop(); }
  BoundedWorker(const BoundedWorker&) = delete;
  BoundedWorker& operator=(const BoundedWorker&) = delete;

  /// Why push() refused an item.
  enum class Refusal {
    none,     // queued
    full,     // the queue was full: counted in refused(), and reported to the handler with the next item
    stopped,  // stop() was called: not counted
  };
  /// Queues the item (moved from only then); the caller keeps a refused
  /// one. `refused_total`, when given, gets the count of refused items
  /// including this one if it was refused for a full queue.
  Refusal push(Item& item, std::uint64_t* refused_total = nullptr) {
    {
      std::lock_guard guard(state_->mutex);
      if (state_->stopping) return Refusal::stopped;
      if (state_->queue.size() >= state_->capacity) {
        ++state_->unreported;
        ++state_->refused;
        if (refused_total != nullptr) *refused_total = state_->refused;
        return Refusal::full;
      }
      state_->queue.push_back(Queued{std::move(item), RefusedGap{std::exchange(state_->unreported, 0), state_->refused}});
      ++state_->accepted;
    }
    state_->wake.notify_one();
    return Refusal::none;
  }

  /// Waits until every item queued before the call is handled, at most
  /// until `deadline`; true if they were.
  bool flush(SteadyTime deadline) {
    std::unique_lock lock(state_->mutex);
    const std::uint64_t target = state_->accepted;
    return state_->progress.wait_until(lock, deadline, [&] { return state_->handled >= target; });
  }

  /// Refuses new items, handles the queued ones until `deadline`, then
  /// requests stop of the one in flight and returns those never handled
  /// (the caller reports them). Once only: a later call returns at once,
  /// whatever became of the thread. Called from the worker thread itself
  /// (a handler stopping its own worker), it neither waits nor joins, and
  /// gives back everything still queued.
  std::deque<Item> stop(SteadyTime deadline = SteadyTime::max(), Stuck stuck = Stuck::join) {
    std::deque<Item> unhandled;
    if (stopped_.exchange(true)) return unhandled;
    bool on_worker = false;
    {
      std::unique_lock lock(state_->mutex);
      on_worker = state_->worker_id == std::this_thread::get_id();
      state_->stopping = true;
      state_->wake.notify_all();
      if (!on_worker) state_->progress.wait_until(lock, deadline, [&] { return state_->queue.empty() && !state_->busy; });
      // What is left is given back; from the worker itself, everything
      // still queued (the owner may be going away under the handler).
      for (auto& queued : state_->queue) unhandled.push_back(std::move(queued.item));
      state_->queue.clear();
      state_->in_flight.request_stop();  // under the lock: a handler's wait on it cannot miss it
    }
    state_->wake.notify_all();
    if (!thread_.joinable()) return unhandled;
    if (on_worker) {
      thread_.detach();  // it ends when its handler returns: the queue is closed
    } else if (stuck == Stuck::detach && !idle()) {
      thread_.detach();
    } else {
      thread_.join();
    }
    return unhandled;
  }

  /// Items refused because the queue was full.
  [[nodiscard]] std::uint64_t refused() const {
    std::lock_guard guard(state_->mutex);
    return state_->refused;
  }
  /// Of those, the ones no handler was told of (after stop(): never will be).
  [[nodiscard]] std::uint64_t unreported() const {
    std::lock_guard guard(state_->mutex);
    return state_->unreported;
  }

 private:
  struct Queued {
    Item item;
    RefusedGap gap;
  };
  struct State {
    State(std::size_t queue_capacity, Handler item_handler, GapHandler gap_handler)
        : capacity(queue_capacity), handler(std::move(item_handler)), on_gap(std::move(gap_handler)) {}
    const std::size_t capacity;
    const Handler handler;
    const GapHandler on_gap;
    std::mutex mutex;  // guards the rest
    std::condition_variable wake;      // the worker waits for items
    std::condition_variable progress;  // flush() and stop() wait for the worker
    std::deque<Queued> queue;
    std::thread::id worker_id;  // set by the worker before it takes an item
    std::uint64_t accepted = 0, handled = 0, refused = 0, unreported = 0;
    bool stopping = false;
    bool busy = false;  // a handler runs
    std::stop_source in_flight;

    void run() {
      std::unique_lock lock(mutex);
      worker_id = std::this_thread::get_id();
      while (true) {
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) break;  // stopping, and everything handled
        Queued next = std::move(queue.front());
        queue.pop_front();
        busy = true;
        lock.unlock();
        handler(next.item, next.gap, in_flight.get_token());
        lock.lock();
        // Drained before any item came after a gap: tell it now.
        if (queue.empty() && unreported > 0 && on_gap) {
          const RefusedGap gap{std::exchange(unreported, 0), refused};
          lock.unlock();
          on_gap(gap);
          lock.lock();
        }
        busy = false;
        ++handled;
        progress.notify_all();
      }
      progress.notify_all();
    }
  };

  [[nodiscard]] bool idle() const {
    std::lock_guard guard(state_->mutex);
    return !state_->busy;
  }

  std::shared_ptr<State> state_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};  // stop() ran
};

}  // namespace fleetcron::detail
