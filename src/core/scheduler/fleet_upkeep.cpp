// The upkeep thread: the fleet's controls polled and the replica announced,
// each on its period.
#include "core/scheduler/fleet_upkeep.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

FleetUpkeep::FleetUpkeep(std::shared_ptr<Clock> clock, FleetControls* controls,
                         std::chrono::nanoseconds control_poll_interval, RegistryMembership* membership,
                         std::chrono::nanoseconds heartbeat_interval)
    : clock_(std::move(clock)),
      controls_(controls),
      control_poll_interval_(control_poll_interval),
      membership_(membership),
      heartbeat_interval_(heartbeat_interval) {
  FLEETCRON_ASSERT(controls_ != nullptr || membership_ != nullptr);
  FLEETCRON_ASSERT(controls_ == nullptr || control_poll_interval_ > std::chrono::nanoseconds::zero());
  FLEETCRON_ASSERT(membership_ == nullptr || heartbeat_interval_ > std::chrono::nanoseconds::zero());
}

FleetUpkeep::~FleetUpkeep() { stop(); }

void FleetUpkeep::start() {
  FLEETCRON_ASSERT(!thread_.joinable());
  thread_ = std::thread([this] { main(); });
}

void FleetUpkeep::note_run_started() {
  if (membership_ == nullptr || runs_unlisted_flag_.exchange(true, std::memory_order_relaxed)) return;
  {
    std::lock_guard guard(mutex_);
    runs_unlisted_ = true;
  }
  cv_.notify_one();
}

void FleetUpkeep::poll_soon() {
  if (controls_ == nullptr) return;
  {
    std::lock_guard guard(mutex_);
    poll_soon_ = true;
  }
  cv_.notify_one();
}

void FleetUpkeep::stop_polls() {
  {
    std::lock_guard guard(mutex_);
    polls_stopped_ = true;
  }
  cv_.notify_all();
  if (controls_ != nullptr) controls_->stop();
}

void FleetUpkeep::stop() {
  std::lock_guard join_guard(join_mutex_);
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FleetUpkeep::main() {
  using std::chrono::nanoseconds;
  const auto never = Clock::SteadyTime::max();
  const nanoseconds early = std::min(run_listed_within, heartbeat_interval_);
  const auto start = clock_->steady_now();
  auto next_poll = controls_ != nullptr ? start + control_poll_interval_ : never;
  auto next_announce = membership_ != nullptr ? start + heartbeat_interval_ : never;
  auto last_announce = start;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto now = clock_->steady_now();
    const auto announce_at = runs_unlisted_ ? std::min(next_announce, last_announce + early) : next_announce;
    const auto poll_at = polls_stopped_ ? never : poll_soon_ ? now : next_poll;
    const auto due = std::min(announce_at, poll_at);
    if (now < due) {  // woken early (a run started, a stop): look again
      clock_->wait_until(cv_, lock, std::min(due, now + std::chrono::hours{1}));
      continue;
    }
    const bool announcing = now >= announce_at;
    if (announcing) {  // the runs started from here on are listed next time
      runs_unlisted_ = false;
      runs_unlisted_flag_.store(false, std::memory_order_relaxed);
    }
    const bool polling = now >= poll_at;
    if (polling) poll_soon_ = false;
    lock.unlock();
    if (announcing) {
      const bool answered = membership_->announce().status != ReplicaAnnounce::Status::error;
      last_announce = now;
      next_announce = now + (answered ? heartbeat_interval_ : heartbeat_interval_ / retry_divisor);
      if (answered) membership_->catalogue_if_due();
    }
    if (polling) {
      controls_->poll();
      next_poll = now + control_poll_interval_;
    }
    lock.lock();
  }
}

}  // namespace fleetcron::detail
