// The fleet controls' view of the scheduler (ControlsHost); the upkeep
// thread that polls them is FleetUpkeep's.
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

}  // namespace fleetcron
