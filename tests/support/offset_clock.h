// A replica's clock set off from another's by a fixed amount: the same
// steady time (and waits), a wall clock `offset` ahead (negative: behind).
#pragma once

#include <chrono>
#include <memory>

#include "fleetcron/clock.h"

namespace fleetcron::test {

class OffsetClock final : public Clock {
 public:
  OffsetClock(std::shared_ptr<Clock> inner, std::chrono::nanoseconds offset)
      : inner_(std::move(inner)), offset_(offset) {}
  Instant now() const noexcept override { return inner_->now() + offset_; }
  SteadyTime steady_now() const noexcept override { return inner_->steady_now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override {
    inner_->wait_until(cv, lock, deadline);
  }

 private:
  std::shared_ptr<Clock> inner_;
  std::chrono::nanoseconds offset_;
};

}  // namespace fleetcron::test
