// The upkeep thread, with a fleet state and its controls or registry on:
// polls the fleet's controls (FleetControls) and announces the replica
// and writes its catalogue (RegistryMembership), each on its period; and
// the controls' view of the scheduler (ControlsHost).
#include <fmt/format.h>

#include "core/scheduler/scheduler_impl.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;
using detail::FireKind;

/// The scheduler as the fleet controls see it: its entry table under
/// mutex_, its run queue, its registry's verdict, its events and log.
class Scheduler::Impl::ControlsHost final : public detail::FleetControls::Host,
                                            private detail::FleetControls::EntryTable {
 public:
  explicit ControlsHost(Impl& impl) : impl_(impl) {}

  Instant fleet_now() override { return impl_.fleet_now(); }
  void with_entries(const std::function<void(EntryTable&)>& apply) override {
    {
      std::lock_guard guard(impl_.mutex_);
      apply(*this);
    }
    impl_.loop_cv_.notify_one();
  }
  std::string queue_manual(const std::shared_ptr<Entry>& entry, Instant scheduled_at) override {
    std::vector<Fire> batch{Fire{entry, scheduled_at, FireKind::manual}};
    const bool stopping = impl_.enqueue(batch);
    if (stopping) return "the scheduler is stopping";
    return batch.empty() ? "" : "the run queue is full";
  }
  std::string settings_refusal() override { return impl_.settings_refusal(); }
  void publish(Event event) override { impl_.publish(std::move(event)); }
  void log(LogLevel level, const std::string& message) override { impl_.log(level, message); }

 private:
  std::shared_ptr<Entry> find(const std::string& job_key) const override {
    const auto it = impl_.keys_.find(job_key);
    return it == impl_.keys_.end() ? nullptr : impl_.entries_.at(it->second);
  }
  void set_paused(const std::shared_ptr<Entry>& entry, bool paused, std::vector<Event>& events) override {
    // Paused fleet-wide, what it missed is not caught up later: a resume
    // starts from now, on a replica restarted during the pause too.
    if (paused && entry->cursor) entry->cursor->caught_up = true;
    impl_.set_paused_locked(entry, paused, events);
  }

  Impl& impl_;
};

std::unique_ptr<detail::FleetControls> Scheduler::Impl::make_controls() {
  if (!controls_on()) return nullptr;
  controls_host_ = std::make_unique<ControlsHost>(*this);
  return std::make_unique<detail::FleetControls>(*controls_host_, options_.fleet.state, options_.fleet.replica_id,
                                                 clock_);
}

void Scheduler::Impl::upkeep_main() {
  using std::chrono::nanoseconds;
  const auto never = Clock::SteadyTime::max();
  const nanoseconds heartbeat = options_.fleet.registry_heartbeat_interval;
  // A run that started is listed within a second (at most one extra
  // announcement a second), so a death soon after its start still shows.
  const nanoseconds early = std::min<nanoseconds>(std::chrono::seconds{1}, heartbeat);
  const auto start = clock_->steady_now();
  auto next_poll = controls_on() ? start + options_.fleet.control_poll_interval : never;
  auto next_announce = registry_on() ? start + heartbeat : never;
  auto last_announce = start;
  std::unique_lock lock(upkeep_mutex_);
  while (!upkeep_stopping_) {
    const auto now = clock_->steady_now();
    const auto announce_at = runs_unlisted_ ? std::min(next_announce, last_announce + early) : next_announce;
    const auto poll_at = controls_stopping_ ? never : next_poll;
    const auto due = std::min(announce_at, poll_at);
    if (now < due) {  // woken early (a run started, a stop): look again
      clock_->wait_until(upkeep_cv_, lock, std::min(due, now + std::chrono::hours{1}));
      continue;
    }
    const bool announcing = now >= announce_at;
    if (announcing) {  // the runs started from here on are listed next time
      runs_unlisted_ = false;
      runs_unlisted_flag_.store(false, std::memory_order_relaxed);
    }
    lock.unlock();
    if (announcing) {
      // A failed announcement is tried again sooner: a fifth of the period.
      const bool answered = membership_->announce().status != ReplicaAnnounce::Status::error;
      last_announce = now;
      next_announce = now + (answered ? heartbeat : heartbeat / 5);
      if (answered) membership_->catalogue_if_due();
    }
    if (now >= poll_at) {
      controls_->poll();
      next_poll = now + options_.fleet.control_poll_interval;
    }
    lock.lock();
  }
}

void Scheduler::Impl::stop_upkeep() {
  {
    std::lock_guard guard(upkeep_mutex_);
    upkeep_stopping_ = true;
  }
  upkeep_cv_.notify_all();
}

void Scheduler::Impl::stop_controls() {
  {
    std::lock_guard guard(upkeep_mutex_);
    controls_stopping_ = true;
  }
  upkeep_cv_.notify_all();
  if (controls_) controls_->stop();
}

}  // namespace fleetcron
