#include "fleetcron/clock.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/support/assert.h"

namespace fleetcron {
namespace {

class SystemClock final : public Clock {
 public:
  Instant now() const noexcept override {
    return std::chrono::time_point_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now());
  }
  SteadyTime steady_now() const noexcept override { return std::chrono::steady_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

std::shared_ptr<Clock> system_clock() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

struct FLEETCRON_LOCAL VirtualClock::State {
  struct Waiter {
    std::uint64_t id;
    std::condition_variable* cv;
    std::mutex* mutex;
    SteadyTime deadline;
    int waking = 0;  // wake() calls about to lock `mutex`: the waiter must not leave before they are done
  };

  explicit State(Instant start) : wall_(start) {}
  /// Wakes the waiters past their deadline (every waiter: `everyone`).
  void wake(bool everyone);

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable woken_;  // signals waking counts dropping to 0
  Instant wall_;
  SteadyTime steady_ = SteadyTime{} + std::chrono::hours{1};
  std::uint64_t next_waiter_id_ = 1;
  std::vector<Waiter> waiters_;
};

VirtualClock::VirtualClock(Instant start) : state_(std::make_unique<State>(start)) {}
VirtualClock::~VirtualClock() = default;

Instant VirtualClock::now() const noexcept {
  std::lock_guard guard(state_->mutex_);
  return state_->wall_;
}

Clock::SteadyTime VirtualClock::steady_now() const noexcept {
  std::lock_guard guard(state_->mutex_);
  return state_->steady_;
}

void VirtualClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) {
  FLEETCRON_ASSERT(lock.owns_lock());
  std::uint64_t id = 0;
  {
    std::lock_guard guard(state_->mutex_);
    if (state_->steady_ >= deadline) return;
    id = state_->next_waiter_id_++;
    state_->waiters_.push_back(State::Waiter{id, &cv, lock.mutex(), deadline});
  }
  // advance() locks the waiter's mutex before notifying, and the caller
  // holds it until cv.wait() releases it, so no wake-up falls in between.
  cv.wait(lock);
  // Leave only when no wake() still holds a pointer to our cv and mutex
  // (they may die as soon as we return). Waiting for that means releasing
  // the caller's lock, which wake() needs; callers re-check their condition.
  std::unique_lock guard(state_->mutex_);
  auto mine = [id](const State::Waiter& w) { return w.id == id; };
  auto busy = [&] {
    auto it = std::find_if(state_->waiters_.begin(), state_->waiters_.end(), mine);
    return it != state_->waiters_.end() && it->waking > 0;
  };
  if (busy()) {
    lock.unlock();
    state_->woken_.wait(guard, [&] { return !busy(); });
    std::erase_if(state_->waiters_, mine);
    guard.unlock();
    lock.lock();
    return;
  }
  std::erase_if(state_->waiters_, mine);
}

void VirtualClock::advance(std::chrono::nanoseconds step) {
  if (step < std::chrono::nanoseconds::zero()) throw std::invalid_argument("VirtualClock::advance: negative step");
  {
    std::lock_guard guard(state_->mutex_);
    state_->wall_ += step;
    state_->steady_ += step;
  }
  state_->wake(false);
}

void VirtualClock::jump_wall(std::chrono::nanoseconds step) {
  {
    std::lock_guard guard(state_->mutex_);
    state_->wall_ += step;
  }
  state_->wake(true);
}

std::size_t VirtualClock::waiter_count() const {
  std::lock_guard guard(state_->mutex_);
  return state_->waiters_.size();
}

std::size_t VirtualClock::due_waiter_count() const {
  std::lock_guard guard(state_->mutex_);
  const auto due = [this](const State::Waiter& w) { return w.deadline <= state_->steady_; };
  return static_cast<std::size_t>(std::count_if(state_->waiters_.begin(), state_->waiters_.end(), due));
}

std::optional<Clock::SteadyTime> VirtualClock::next_deadline() const {
  std::lock_guard guard(state_->mutex_);
  std::optional<SteadyTime> earliest;
  for (const State::Waiter& w : state_->waiters_) {
    if (!earliest || w.deadline < *earliest) earliest = w.deadline;
  }
  return earliest;
}

void VirtualClock::State::wake(bool everyone) {
  std::vector<Waiter> due;
  {
    std::lock_guard guard(mutex_);
    for (Waiter& w : waiters_) {
      if (everyone || w.deadline <= steady_) {
        ++w.waking;  // pins the waiter (and its cv and mutex) until we are done
        due.push_back(w);
      }
    }
  }
  for (const Waiter& w : due) {
    std::lock_guard guard(*w.mutex);
    w.cv->notify_all();
  }
  {
    std::lock_guard guard(mutex_);
    for (const Waiter& done : due) {
      for (Waiter& w : waiters_) {
        if (w.id == done.id) --w.waking;
      }
    }
  }
  woken_.notify_all();
}

bool sleep_for(Clock& clock, std::chrono::nanoseconds duration, std::stop_token stop) {
  if (duration <= std::chrono::nanoseconds::zero()) return !stop.stop_requested();
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;
  std::stop_callback on_stop(stop, [&] {
    std::lock_guard guard(mutex);
    stopped = true;
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  const auto deadline = clock.steady_now() + duration;
  while (!stopped && clock.steady_now() < deadline) clock.wait_until(cv, lock, deadline);
  return !stopped;
}

}  // namespace fleetcron
