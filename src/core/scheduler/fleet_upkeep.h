// Internal: the upkeep thread, with a fleet state and its controls or
// registry on — polls the fleet's controls (FleetControls) and announces
// the replica and writes its catalogue (RegistryMembership), each on its
// period (a component of the scheduler with its own thread and lock).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/scheduler/fleet_controls.h"
#include "core/scheduler/registry_membership.h"
#include "fleetcron/clock.h"

namespace fleetcron::detail {

class FleetUpkeep {
 public:
  /// A run that started is announced within this long (at most one extra
  /// announcement this often), so a death soon after its start still shows.
  static constexpr std::chrono::nanoseconds run_listed_within = std::chrono::seconds{1};
  /// A failed announcement is tried again after this part of the period.
  static constexpr int retry_divisor = 5;

  /// `controls` polled every `control_poll_interval`, `membership`
  /// announced every `heartbeat_interval`: either may be null (that side
  /// off), not both. Both outlive this.
  FleetUpkeep(std::shared_ptr<Clock> clock, FleetControls* controls, std::chrono::nanoseconds control_poll_interval,
              RegistryMembership* membership, std::chrono::nanoseconds heartbeat_interval);
  FleetUpkeep(const FleetUpkeep&) = delete;
  FleetUpkeep& operator=(const FleetUpkeep&) = delete;
  ~FleetUpkeep();  // stop()

  /// Starts the thread, once, before stop(); the first poll and
  /// announcement come one period after this.
  void start();
  /// A run started: it is listed by an announcement within
  /// run_listed_within. Lock-free once noted since the last announcement.
  void note_run_started();
  /// Polls the controls now, not at the next period (a pause to write).
  void poll_soon();
  /// No more polls, and no trigger taken by a poll under way (waits for it).
  void stop_polls();
  /// The thread leaves and is joined. Idempotent; never from the thread.
  void stop();

 private:
  void main();

  std::shared_ptr<Clock> clock_;
  FleetControls* const controls_;
  const std::chrono::nanoseconds control_poll_interval_;
  RegistryMembership* const membership_;
  const std::chrono::nanoseconds heartbeat_interval_;
  std::mutex mutex_;  // guards polls_stopped_, stopping_, runs_unlisted_
  std::condition_variable cv_;
  bool polls_stopped_ = false;  // no more polls: the scheduler's stop() began
  bool stopping_ = false;       // the thread leaves: the runs ended
  bool runs_unlisted_ = false;  // a run started since the last announcement
  bool poll_soon_ = false;      // poll_soon() since the last poll
  // The same, read without the lock: spares a run's start the mutex once set.
  std::atomic<bool> runs_unlisted_flag_{false};
  std::mutex join_mutex_;  // stop() from two stoppers joins once
  std::thread thread_;
};

}  // namespace fleetcron::detail
