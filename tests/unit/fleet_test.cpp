// The fleet handle stamps every control and read with the store's clock,
// never this host's (docs/fleet-state.md, "One clock").
#include <gtest/gtest.h>

#include <stdexcept>

#include "fleetcron/coordination.h"
#include "fleetcron/fleet.h"
#include "fleetcron/memory_fleet_state.h"
#include "fleetcron/rfc3339.h"
#include "support/forwarding_fleet_state.h"

namespace fleetcron {
namespace {

using namespace std::chrono_literals;

/// A store whose clock runs an hour ahead of this host's.
class StoreAnHourAhead final : public test::ForwardingFleetState {
 public:
  StoreAnHourAhead(std::shared_ptr<FleetState> inner, std::shared_ptr<Clock> clock)
      : ForwardingFleetState(std::move(inner)), clock_(std::move(clock)) {}
  std::optional<Instant> store_now() override { return clock_->now() + 1h; }

 private:
  std::shared_ptr<Clock> clock_;
};

TEST(Fleet, ControlsAreStampedWithTheStoresClockNotThisHosts) {
  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-03-01T12:00:00Z"));
  Fleet fleet(std::make_shared<StoreAnHourAhead>(std::make_shared<MemoryFleetState>(clock), clock), clock);
  const Instant store_time = parse_rfc3339("2026-03-01T13:00:00Z");
  EXPECT_EQ(fleet.now(), store_time);
  ASSERT_EQ(fleet.pause("job", "alice").status, ControlChange::Status::changed);
  EXPECT_EQ(fleet.pause("job", "alice").status, ControlChange::Status::unchanged);
  const ControlChange trigger = fleet.trigger("job", "alice", 2min);
  ASSERT_EQ(trigger.status, ControlChange::Status::changed) << trigger.error;
  ControlsRead controls = fleet.controls();
  ASSERT_EQ(controls.status, ControlsRead::Status::found) << controls.error;
  ASSERT_EQ(controls.jobs.size(), 1u);
  const JobControl job = controls.jobs.front();
  EXPECT_TRUE(job.paused);
  EXPECT_EQ(job.changed_by, "alice");
  EXPECT_EQ(job.changed_at, store_time);
  ASSERT_EQ(job.triggers.size(), 1u);
  EXPECT_EQ(job.triggers.front().id, trigger.trigger_id);
  EXPECT_EQ(job.triggers.front().requested_at, store_time);
  EXPECT_EQ(job.triggers.front().expires_at, store_time + 2min);
  // Three minutes on: expired on the store's clock, whatever this host's says.
  clock->advance(3min);
  controls = fleet.controls();
  ASSERT_EQ(controls.jobs.size(), 1u);
  EXPECT_TRUE(controls.jobs.front().triggers.empty());
  ASSERT_EQ(controls.expired.size(), 1u);
  ASSERT_EQ(fleet.resume("job", "bob").status, ControlChange::Status::changed);
  controls = fleet.controls();
  ASSERT_EQ(controls.resumed.size(), 1u);
  EXPECT_EQ(controls.resumed.front().changed_by, "bob");
  EXPECT_EQ(controls.resumed.front().changed_at, store_time + 3min);
}

TEST(Fleet, ReadsTheLedgerTheReplicasAndTheCatalogue) {
  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-03-01T12:00:00Z"));
  auto state = std::make_shared<MemoryFleetState>(clock);
  Fleet fleet(state, clock);
  FireRecord record;
  record.job_key = "job";
  record.scheduled_at = parse_rfc3339("2026-03-01T11:59:00Z");
  record.fire_key = fire_key("job", record.scheduled_at);
  record.fate = FireFate::succeeded;
  record.replica_id = "r1";
  record.attempts = 1;
  const LedgerWrite write{record, LedgerRetention{}};
  ASSERT_EQ(state->record_fires(std::span(&write, 1)).front().status, LedgerWriteResult::Status::written);
  const LedgerRead history = fleet.history("job", 10);
  ASSERT_EQ(history.status, LedgerRead::Status::found) << history.error;
  ASSERT_EQ(history.records.size(), 1u);
  EXPECT_EQ(history.records.front().fire_key, record.fire_key);
  EXPECT_EQ(fleet.replicas().status, RegistryRead::Status::found);
  EXPECT_TRUE(fleet.replicas().replicas.empty());
  EXPECT_EQ(fleet.jobs().status, CatalogueRead::Status::found);
  EXPECT_EQ(&fleet.state(), state.get());
  EXPECT_THROW(Fleet(nullptr, clock), std::invalid_argument);
  EXPECT_THROW(Fleet(state, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron
