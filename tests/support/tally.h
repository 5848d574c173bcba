// Test support: an observer that counts skips (by reason) and completed
// runs, for tests that wait on those counts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <variant>

#include "fleetcron/events.h"

namespace fleetcron::test {

class Tally final : public Observer {
 public:
  void on_event(const Event& event) override {
    std::lock_guard guard(mutex);
    if (const auto* skipped = std::get_if<SkippedFireEvent>(&event)) {
      ++skips[skipped->reason];
      last_skip_error = skipped->error;
    }
    if (std::holds_alternative<JobCompletedEvent>(event)) ++completed;
    cv.notify_all();
  }
  /// Waits (real time, at most `limit`) until `condition` holds; it runs
  /// with `mutex` held.
  bool wait(const std::function<bool()>& condition, std::chrono::milliseconds limit = std::chrono::seconds{30}) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, limit, condition);
  }
  /// Call with `mutex` held (inside wait()'s condition, or under a lock).
  std::size_t total_skips() const {
    std::size_t n = 0;
    for (const auto& [reason, count] : skips) n += count;
    return n;
  }
  std::mutex mutex;
  std::condition_variable cv;
  std::map<SkipReason, std::size_t> skips;
  std::string last_skip_error;
  std::size_t completed = 0;
};

}  // namespace fleetcron::test
