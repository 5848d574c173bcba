// Test harness for the scheduler: a virtual clock, an event log that tests
// wait on (conditions, never sleeps), and helpers.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "fleetcron/fleetcron.h"
#include "support/eventually.h"
#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

/// A recorder that keeps every event and lets tests wait for a condition.
class EventLog final : public Observer {
 public:
  void on_event(const Event& event) override {
    std::lock_guard guard(mutex_);
    events_.push_back(event);
    ++counts_[event.index()];
    cv_.notify_all();
  }

  /// Events of the given types so far (by variant index; O(1)).
  template <class... T>
  std::size_t tally() {
    std::lock_guard guard(mutex_);
    return (counts_[index_of<T>()] + ...);
  }

  /// Waits until the events of the given types number at least `n`.
  template <class... T>
  bool wait_tally(std::size_t n, std::chrono::milliseconds limit = std::chrono::milliseconds{10'000}) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return (counts_[index_of<T>()] + ...) >= n; });
  }

  /// Waits (real time, at most `limit`) until `predicate(events)` holds.
  bool wait_for(const std::function<bool(const std::vector<Event>&)>& predicate,
                std::chrono::milliseconds limit = std::chrono::milliseconds{10'000}) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return predicate(events_); });
  }

  template <class T>
  std::vector<T> all() {
    std::lock_guard guard(mutex_);
    std::vector<T> out;
    for (const auto& event : events_) {
      if (const T* typed = std::get_if<T>(&event)) out.push_back(*typed);
    }
    return out;
  }

  template <class T>
  std::size_t count() {
    return all<T>().size();
  }

  /// Waits until at least `n` events of type T were recorded.
  template <class T>
  bool wait_count(std::size_t n, std::chrono::milliseconds limit = std::chrono::milliseconds{10'000}) {
    return wait_tally<T>(n, limit);
  }

 private:
  template <class T>
  static constexpr std::size_t index_of() {
    return Event(T{}).index();
  }
  std::array<std::size_t, std::variant_size_v<Event>> counts_{};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

/// A clock, a log and options wired together.
struct Harness {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>(at("2026-01-01T00:00:00Z"));
  std::shared_ptr<EventLog> log = std::make_shared<EventLog>();
  std::vector<std::string> messages;
  std::mutex messages_mutex;

  SchedulerOptions options() {
    SchedulerOptions o;
    o.clock = clock;
    o.recorder = log;
    o.random_seed = 42;
    o.limits.max_concurrent = 4;
    o.logger = [this](LogLevel, std::string_view message) {
      std::lock_guard guard(messages_mutex);
      messages.emplace_back(message);
    };
    return o;
  }

  /// Completed runs so far (automatic and manual).
  std::size_t completed() { return log->count<JobCompletedEvent>(); }

  /// Advances in `step`s, `steps` times, waiting after each until `settled`.
  void advance(std::chrono::nanoseconds step, int steps = 1, const std::function<bool()>& settled = {}) {
    for (int i = 0; i < steps; ++i) {
      clock->advance(step);
      if (settled) {
        ASSERT_TRUE(eventually(settled)) << "not settled after step " << i;
      }
    }
  }

  /// Polls a condition that no event signals (e.g. a job reached a point).
  static bool eventually(const std::function<bool()>& condition,
                         std::chrono::milliseconds limit = std::chrono::milliseconds{10'000}) {
    return test::eventually(condition, limit);
  }

  /// Threads that wait on the clock besides jobs: the loop and the
  /// timeout watchdog.
  static constexpr std::size_t idle_waiters = 2;

  /// Waits until every thread woken by the clock has acted and at least
  /// `waiters` threads wait on it again.
  void settle(std::size_t waiters) {
    ASSERT_TRUE(eventually([&] { return clock->due_waiter_count() == 0 && clock->waiter_count() >= waiters; }))
        << "waiters " << clock->waiter_count() << ", due " << clock->due_waiter_count();
  }

  /// Waits until none of `schedulers` has a fire queued and at most
  /// `running` workers in all decide or run one: settle() sees only
  /// threads that wait on the clock, not a worker still deciding a fire,
  /// and a run whose JobCompletedEvent was seen may still be freeing its
  /// job for the next fire (overlap) until then.
  static void settle_runs(std::span<const Scheduler* const> schedulers, std::size_t running = 0) {
    QueueDepthEvent total;
    ASSERT_TRUE(eventually([&] {
      total = {};
      for (const Scheduler* scheduler : schedulers) {
        const QueueDepthEvent depth = scheduler->queue_depth();
        total.queued += depth.queued;
        total.running += depth.running;
      }
      return total.queued == 0 && total.running <= running;
    })) << "queued " << total.queued << ", running " << total.running;
  }
  static void settle_runs(const Scheduler& scheduler, std::size_t running = 0) {
    const Scheduler* const one = &scheduler;
    settle_runs(std::span(&one, 1), running);
  }

  Clock::SteadyTime soon() const { return clock->steady_now() + std::chrono::seconds{30}; }
};

/// The newest `limit` records of `job`'s ledger (a failed read fails the test).
inline std::vector<FireRecord> ledger_of(FleetState& state, const std::string& job, std::size_t limit = 100) {
  LedgerRead read = state.read_fires(job, limit);
  EXPECT_EQ(read.status, LedgerRead::Status::found) << read.error;
  return read.records;
}

/// Waits until the job's ledger satisfies `done`: records are written by
/// each replica's ledger writer, off the thread that made them, so a test
/// that saw an event waits for its record.
inline bool ledger_reaches(FleetState& state, const std::string& job,
                           const std::function<bool(const std::vector<FireRecord>&)>& done) {
  return test::eventually([&] { return done(ledger_of(state, job)); });
}

}  // namespace fleetcron::test
