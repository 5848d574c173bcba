// fleetcron::Fleet — an operator's (or a program's) handle on a fleet:
// pause, resume and trigger its jobs, read its run ledger, its replicas and
// its job catalogue. Every time it writes or compares is the store's clock
// as its StoreClock knows it (this host's clock until a first measurement
// succeeds, docs/fleet-state.md "One clock"): the `now` the FleetState
// operations take is filled in here, never passed by the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/job_catalogue.h"
#include "fleetcron/job_controls.h"
#include "fleetcron/replica_registry.h"

namespace fleetcron {

/// Thread-safe. Calls go to the store each time (nothing is cached but the
/// store clock's offset); the store's failures are answered in the
/// results' status and error, as FleetState's are. Arguments its contract
/// refuses throw std::invalid_argument naming them, as FleetState's do: a
/// blank job key; a `by` that is not 1 to 64 characters without
/// whitespace (check_control_author()); a trigger's `wait` beyond
/// max_trigger_wait or a malformed `request_id`
/// (check_trigger_request_id()); a history `limit` outside 1 to 10,000.
class FLEETCRON_API Fleet {
 public:
  /// Throws std::invalid_argument for a null state or clock.
  explicit Fleet(std::shared_ptr<FleetState> state, std::shared_ptr<Clock> clock = system_clock());
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  /// The store's time now, as well as it is known (StoreClock::now()).
  [[nodiscard]] Instant now();

  /// Pauses the job for the whole fleet until resumed, whatever restarts;
  /// `unchanged` if it already was.
  [[nodiscard]] ControlChange pause(std::string_view job_key, std::string_view by);
  [[nodiscard]] ControlChange resume(std::string_view job_key, std::string_view by);
  /// Asks the fleet to run the job once (FleetState::request_trigger():
  /// one replica that has the job takes it within `wait`, else it expires
  /// and is recorded so; the same `request_id` answers the same trigger).
  [[nodiscard]] ControlChange trigger(std::string_view job_key, std::string_view by,
                                      std::chrono::nanoseconds wait = default_trigger_wait,
                                      std::string_view request_id = {});
  /// The jobs held paused or with triggers waiting.
  [[nodiscard]] ControlsRead controls();
  /// The job's newest `limit` ledger records, newest first.
  [[nodiscard]] LedgerRead history(std::string_view job_key, std::size_t limit);
  /// The live replicas, oldest first.
  [[nodiscard]] RegistryRead replicas();
  /// The jobs the replicas run (and those removed lately), by key.
  [[nodiscard]] CatalogueRead jobs();

  /// The fleet state under it, for what this handle does not wrap.
  [[nodiscard]] FleetState& state() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron
