// Test support: waiting for a condition that no event signals, bounded in
// real time. It polls, yielding for the first microseconds and sleeping
// after, so it never spins against the threads it waits for (two cores,
// TSan).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace fleetcron::test {

/// True once `condition` holds; false if `limit` passed first.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::milliseconds{10'000},
                       std::chrono::microseconds longest_sleep = std::chrono::milliseconds{1}) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + limit;
  auto sleep = std::chrono::microseconds{10};
  while (!condition()) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) return false;
    if (now - started < std::chrono::microseconds{50}) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(longest_sleep, sleep * 2);
  }
  return true;
}

}  // namespace fleetcron::test
