// The fleet-state contract for MemoryFleetState, on a virtual clock.
#include <gtest/gtest.h>

#include "conformance/fleet_state_contract.h"
#include "fleetcron/clock.h"
#include "fleetcron/memory_fleet_state.h"
#include "support/time.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

class MemoryStateFleet final : public FleetStateFleet {
 public:
  MemoryStateFleet()
      : clock_(std::make_shared<VirtualClock>(real_now())), state_(std::make_shared<MemoryFleetState>(clock_)) {}
  // One MemoryFleetState is the store: every replica shares it.
  std::shared_ptr<FleetState> replica() override { return state_; }
  std::chrono::nanoseconds short_keep_for() const override { return 1min; }
  void let_pass(std::chrono::nanoseconds duration) override { clock_->advance(duration); }

 private:
  std::shared_ptr<VirtualClock> clock_;
  std::shared_ptr<MemoryFleetState> state_;
};

const FleetStateBackend memory_backend{"memory", [] { return std::make_unique<MemoryStateFleet>(); }};

INSTANTIATE_TEST_SUITE_P(Memory, FleetStateContract, ::testing::Values(memory_backend),
                         [](const auto& test) { return test.param.name; });

TEST(MemoryFleetState, TheBoundOnLiveCursorsIsAnErrorNamingIt) {
  auto clock = std::make_shared<VirtualClock>(real_now());
  MemoryFleetState state(clock, 2);
  const Instant at = real_now();
  ASSERT_EQ(state.advance_cursor("a", at, 1, 1h).status, CursorAdvance::Status::moved);
  ASSERT_EQ(state.advance_cursor("b", at, 1, 2h).status, CursorAdvance::Status::moved);
  const CursorAdvance third = state.advance_cursor("c", at, 1, 1h);
  ASSERT_EQ(third.status, CursorAdvance::Status::error);
  EXPECT_NE(third.error.find("max_cursors"), std::string::npos) << third.error;
  EXPECT_EQ(state.claim_catch_up("c", std::nullopt, at, 1, 1h, "r").status, CatchUpClaim::Status::error);
  EXPECT_EQ(state.advance_cursor("a", at + 1min, 1, 1h).status, CursorAdvance::Status::moved);  // known jobs go on
  clock->advance(1h);  // "a" expires: room for "c"
  EXPECT_EQ(state.size(), 1u);
  EXPECT_EQ(state.advance_cursor("c", at, 1, 1h).status, CursorAdvance::Status::moved);
  EXPECT_THROW(MemoryFleetState(clock, 0), std::invalid_argument);
  EXPECT_THROW(MemoryFleetState(nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron::test
