#include "fleetcron/fleet.h"

#include <stdexcept>

#include "fleetcron/store_clock.h"

namespace fleetcron {

struct FLEETCRON_LOCAL Fleet::Impl {
  Impl(std::shared_ptr<FleetState> fleet_state, std::shared_ptr<Clock> clock)
      : state(std::move(fleet_state)), store_clock(*state, std::move(clock)) {}
  std::shared_ptr<FleetState> state;
  StoreClock store_clock;  // after `state`: it refers to it
};

namespace {

std::shared_ptr<FleetState> checked(std::shared_ptr<FleetState> state, const std::shared_ptr<Clock>& clock) {
  if (!state) throw std::invalid_argument("Fleet: the fleet state is null");
  if (!clock) throw std::invalid_argument("Fleet: the clock is null");
  return state;
}

}  // namespace

Fleet::Fleet(std::shared_ptr<FleetState> state, std::shared_ptr<Clock> clock)
    : impl_(std::make_unique<Impl>(checked(std::move(state), clock), clock)) {}

Fleet::~Fleet() = default;

Instant Fleet::now() { return impl_->store_clock.now(); }

ControlChange Fleet::pause(std::string_view job_key, std::string_view by) {
  return impl_->state->set_paused(job_key, true, by, now());
}

ControlChange Fleet::resume(std::string_view job_key, std::string_view by) {
  return impl_->state->set_paused(job_key, false, by, now());
}

ControlChange Fleet::trigger(std::string_view job_key, std::string_view by, std::chrono::nanoseconds wait,
                             std::string_view request_id) {
  return impl_->state->request_trigger(job_key, by, now(), wait, request_id);
}

ControlsRead Fleet::controls() { return impl_->state->read_controls(now()); }

LedgerRead Fleet::history(std::string_view job_key, std::size_t limit) {
  return impl_->state->read_fires(job_key, limit);
}

RegistryRead Fleet::replicas() { return impl_->state->read_replicas(now()); }

CatalogueRead Fleet::jobs() { return impl_->state->read_catalogue(now()); }

FleetState& Fleet::state() noexcept { return *impl_->state; }

}  // namespace fleetcron
