// The bounded queue with a thread behind the event bus, the log and the
// notifier: order, refusal when full (counted, and reported with the next
// item), flush, and stop with and without a deadline. Synchronised on a
// gate the handler waits at, never on the machine's pace.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/support/bounded_worker.h"

namespace fleetcron::detail {
namespace {

using namespace std::chrono_literals;
using Worker = BoundedWorker<int>;

/// Holds the handler until opened; says when it has been entered.
class Gate {
 public:
  void enter() {
    std::unique_lock lock(mutex_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void wait_entered(int count) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return entered_ >= count; });
  }
  void open() {
    std::lock_guard guard(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

struct Seen {
  std::mutex mutex;
  std::vector<int> items;
  std::vector<RefusedGap> gaps;
};

Worker::Handler recorder(Seen& seen, Gate* gate = nullptr) {
  return [&seen, gate](int& item, RefusedGap gap, std::stop_token) {
    if (gate != nullptr) gate->enter();
    std::lock_guard guard(seen.mutex);
    seen.items.push_back(item);
    seen.gaps.push_back(gap);
  };
}

TEST(BoundedWorker, HandlesEveryItemInOrderAndDrainsAtStop) {
  Seen seen;
  Worker worker(100, recorder(seen));
  for (int i = 0; i < 50; ++i) {
    int item = i;
    ASSERT_EQ(worker.push(item), Worker::Refusal::none);
  }
  EXPECT_TRUE(worker.stop().empty());
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(seen.items, expected);
  int late = 99;
  EXPECT_EQ(worker.push(late), Worker::Refusal::stopped);
  EXPECT_EQ(late, 99) << "a refused item stays with the caller";
  EXPECT_EQ(worker.refused(), 0U) << "a push after stop is not a drop";
}

TEST(BoundedWorker, AFullQueueRefusesCountsAndReportsTheGapWithTheNextItemQueued) {
  Seen seen;
  Gate gate;
  Worker worker(2, recorder(seen, &gate));
  int first = 1;
  ASSERT_EQ(worker.push(first), Worker::Refusal::none);
  gate.wait_entered(1);  // item 1 is in the handler: the queue holds two more
  for (int i = 2; i <= 3; ++i) {
    int item = i;
    ASSERT_EQ(worker.push(item), Worker::Refusal::none);
  }
  for (int i = 4; i <= 6; ++i) {
    int item = i;
    std::uint64_t refused_so_far = 0;
    EXPECT_EQ(worker.push(item, &refused_so_far), Worker::Refusal::full);
    EXPECT_EQ(refused_so_far, static_cast<std::uint64_t>(i - 3));
  }
  EXPECT_EQ(worker.refused(), 3U);
  EXPECT_EQ(worker.unreported(), 3U);
  gate.open();
  ASSERT_TRUE(worker.flush(std::chrono::steady_clock::now() + 60s));
  int after = 7;
  ASSERT_EQ(worker.push(after), Worker::Refusal::none);
  (void)worker.stop();
  ASSERT_EQ(seen.items, (std::vector<int>{1, 2, 3, 7}));
  EXPECT_EQ(seen.gaps[1].since_previous, 0U);
  EXPECT_EQ(seen.gaps[2].since_previous, 0U);
  EXPECT_EQ(seen.gaps[3].since_previous, 3U) << "told where it happened: with the first item queued after it";
  EXPECT_EQ(seen.gaps[3].total, 3U);
  EXPECT_EQ(worker.unreported(), 0U);
}

TEST(BoundedWorker, AGapIsToldOnItsOwnWhenTheQueueDrainsBeforeAnotherItemComes) {
  Seen seen;
  Gate gate;
  std::mutex gaps_mutex;
  std::condition_variable gaps_cv;
  std::vector<RefusedGap> alone;
  Worker worker(1, recorder(seen, &gate), [&](RefusedGap gap) {
    std::lock_guard guard(gaps_mutex);
    alone.push_back(gap);
    gaps_cv.notify_all();
  });
  for (int i = 1; i <= 4; ++i) {
    int item = i;
    (void)worker.push(item);
    if (i == 1) gate.wait_entered(1);  // 1 in the handler, 2 queued, 3 and 4 refused
  }
  gate.open();
  std::unique_lock lock(gaps_mutex);
  ASSERT_TRUE(gaps_cv.wait_for(lock, 60s, [&] { return !alone.empty(); }));
  ASSERT_EQ(alone.size(), 1U);
  EXPECT_EQ(alone[0].since_previous, 2U);
  EXPECT_EQ(alone[0].total, 2U);
  EXPECT_EQ(worker.unreported(), 0U);
}

TEST(BoundedWorker, StopAtADeadlineGivesBackWhatWasNotHandledAndStopsTheItemInFlight) {
  Gate entered;
  entered.open();  // counts entries only
  std::atomic<bool> stop_seen{false};
  std::mutex mutex;
  std::condition_variable_any cv;
  Worker worker(10, [&](int&, RefusedGap, std::stop_token stop) {
    entered.enter();
    std::unique_lock lock(mutex);
    cv.wait(lock, stop, [] { return false; });  // a delivery that ends only when told to
    stop_seen = stop.stop_requested();
  });
  for (int i = 0; i < 4; ++i) {
    int item = i;
    ASSERT_EQ(worker.push(item), Worker::Refusal::none);
  }
  entered.wait_entered(1);
  EXPECT_FALSE(worker.flush(std::chrono::steady_clock::now() + 1ms));
  const auto unhandled = worker.stop(std::chrono::steady_clock::now());  // the deadline has passed
  EXPECT_EQ(unhandled, (std::deque<int>{1, 2, 3}));
  EXPECT_TRUE(stop_seen) << "the item in flight was asked to stop, and stop() joined it";
}

TEST(BoundedWorker, AStuckHandlerIsLeftBehindWhenAskedToDetach) {
  auto gate = std::make_shared<Gate>();
  auto worker = std::make_unique<Worker>(4, [gate](int&, RefusedGap, std::stop_token) { gate->enter(); });
  int item = 1;
  ASSERT_EQ(worker->push(item), Worker::Refusal::none);
  gate->wait_entered(1);
  const auto unhandled = worker->stop(std::chrono::steady_clock::now(), Worker::Stuck::detach);
  EXPECT_TRUE(unhandled.empty());  // returned without waiting for the handler
  worker.reset();                  // nor does the destructor wait (it would hang here)
  gate->open();                    // the thread then ends on its own
}

TEST(BoundedWorker, AHandlerMayStopItsOwnWorker) {
  Seen seen;
  Worker* self = nullptr;
  Worker worker(4, [&](int& item, RefusedGap, std::stop_token) {
    if (item == 1) {
      (void)self->stop();  // neither waits for nor joins itself
      (void)self->stop();  // and a second call returns at once
    }
    std::lock_guard guard(seen.mutex);
    seen.items.push_back(item);
  });
  self = &worker;
  int first = 1;
  ASSERT_EQ(worker.push(first), Worker::Refusal::none);
  ASSERT_TRUE(worker.flush(std::chrono::steady_clock::now() + 60s));
  EXPECT_EQ(seen.items, (std::vector<int>{1}));
}

}  // namespace
}  // namespace fleetcron::detail
