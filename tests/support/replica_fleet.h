// Test support: N schedulers on one virtual clock, each claiming through a
// claimer of its own (a real backend's, one connection per replica as
// separate processes would have), running the same jobs every second; one
// journal of every run's fire key and fence. The Redis and NATS scheduler
// tests share it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fleetcron/fleetcron.h"
#include "support/tally.h"

namespace fleetcron::test {

class ReplicaFleet {
 public:
  using MakeClaimer = std::function<std::shared_ptr<Claimer>(std::size_t replica)>;

  /// `replicas` schedulers with `jobs` jobs each ("job0", "job1", …, every
  /// second), started.
  ReplicaFleet(std::size_t replicas, int jobs, std::shared_ptr<VirtualClock> clock, const MakeClaimer& make_claimer)
      : jobs_(jobs), clock_(std::move(clock)) {
    for (std::size_t r = 0; r < replicas; ++r) {
      Replica& replica = replicas_.emplace_back();
      SchedulerOptions options;
      options.clock = clock_;
      options.recorder = replica.tally;
      options.claimer = make_claimer(r);
      replica.scheduler = std::make_unique<Scheduler>(options);
      for (int i = 0; i < jobs; ++i) {
        replica.scheduler->add(aligned_every(std::chrono::seconds{1}), [this](const FireContext& fire, std::stop_token) {
          std::lock_guard guard(mutex_);
          fences_[fire.fire_key].push_back(fire.fence);
          by_instant_.emplace_back(fire.scheduled_at, fire.fence);
        }, EntryOptions{.key = "job" + std::to_string(i)});
      }
      replica.scheduler->start();
    }
  }
  ~ReplicaFleet() { stop(); }
  ReplicaFleet(const ReplicaFleet&) = delete;
  ReplicaFleet& operator=(const ReplicaFleet&) = delete;

  /// Advances the clock one second `steps` times, each time until every
  /// replica ran or skipped each job's fire of that instant.
  ::testing::AssertionResult advance(int steps) {
    for (int step = 1; step <= steps; ++step) {
      clock_->advance(std::chrono::seconds{1});
      ++steps_;
      for (std::size_t r = 0; r < replicas_.size(); ++r) {
        Tally& tally = *replicas_[r].tally;
        const auto due = static_cast<std::size_t>(jobs_ * steps_);
        if (!tally.wait([&] { return tally.completed + tally.total_skips() == due; })) {
          return ::testing::AssertionFailure() << "replica " << r << " did not decide every fire of step " << steps_;
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  /// Stops every replica (once); false if one did not stop in time.
  bool stop() {
    bool stopped = true;
    for (auto& replica : replicas_) {
      if (replica.scheduler) stopped = replica.scheduler->stop(clock_->steady_now() + std::chrono::seconds{30}) && stopped;
      replica.scheduler.reset();
    }
    return stopped;
  }

  /// Every fire of every step ran exactly once in the fleet; the other
  /// replicas' skips of it are already_claimed, and nothing else; fences
  /// are distinct, and every fire of a later instant has a larger fence
  /// than every fire of an earlier one (claims are granted in time order).
  ::testing::AssertionResult ran_each_fire_once_with_increasing_fences() {
    std::lock_guard guard(mutex_);
    if (fences_.size() != static_cast<std::size_t>(jobs_ * steps_)) {
      return ::testing::AssertionFailure() << fences_.size() << " fires ran of " << jobs_ * steps_;
    }
    for (const auto& [key, fences] : fences_) {
      if (fences.size() != 1) return ::testing::AssertionFailure() << key << " ran " << fences.size() << " times";
    }
    for (std::size_t r = 0; r < replicas_.size(); ++r) {
      Tally& tally = *replicas_[r].tally;
      std::lock_guard counts(tally.mutex);
      if (tally.total_skips() != tally.skips[SkipReason::already_claimed]) {
        return ::testing::AssertionFailure() << "replica " << r << " skipped for another reason than "
                                             << "already-claimed: " << tally.last_skip_error;
      }
    }
    return increasing_fences();
  }

  /// Runs and skips of `reason` over every replica.
  std::size_t runs() const { return count([](const Tally& t) { return t.completed; }); }
  std::size_t skips(SkipReason reason) const {
    return count([reason](const Tally& t) {
      const auto it = t.skips.find(reason);
      return it == t.skips.end() ? std::size_t{0} : it->second;
    });
  }

 private:
  struct Replica {
    std::shared_ptr<Tally> tally = std::make_shared<Tally>();
    std::unique_ptr<Scheduler> scheduler;
  };

  ::testing::AssertionResult increasing_fences() {  // mutex_ held
    std::sort(by_instant_.begin(), by_instant_.end());
    std::set<std::uint64_t> distinct;
    std::uint64_t max_before = 0, max_current = 0;
    Instant current{};
    for (const auto& [instant, fence] : by_instant_) {
      if (instant != current) {
        max_before = std::max(max_before, max_current);
        current = instant;
      }
      if (fence <= max_before) {
        return ::testing::AssertionFailure() << "fence " << fence << " is not above an earlier instant's " << max_before;
      }
      max_current = std::max(max_current, fence);
      distinct.insert(fence);
    }
    if (distinct.size() != by_instant_.size()) {
      return ::testing::AssertionFailure() << by_instant_.size() - distinct.size() << " fences handed out twice";
    }
    return ::testing::AssertionSuccess();
  }

  std::size_t count(const std::function<std::size_t(const Tally&)>& of) const {
    std::size_t total = 0;
    for (const auto& replica : replicas_) {
      std::lock_guard guard(replica.tally->mutex);
      total += of(*replica.tally);
    }
    return total;
  }

  int jobs_;
  int steps_ = 0;
  std::shared_ptr<VirtualClock> clock_;
  std::mutex mutex_;  // guards the journal
  std::map<std::string, std::vector<std::uint64_t>> fences_;  // fire key -> fences of its runs
  std::vector<std::pair<Instant, std::uint64_t>> by_instant_;  // (scheduled_at, fence) per run
  // Last: destroyed first, so replicas started before a constructor that
  // threw are stopped before the journal their jobs write goes.
  std::vector<Replica> replicas_;
};

}  // namespace fleetcron::test
