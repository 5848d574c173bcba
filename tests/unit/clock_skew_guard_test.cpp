// backend::ClockSkewGuard: the bound every Claimer applies, its option
// errors, its refusals' wording and the latest measured offset.
#include "fleetcron/backend/clock_skew_guard.h"

#include <gtest/gtest.h>

#include "fleetcron/rfc3339.h"

namespace fleetcron::backend {
namespace {

using namespace std::chrono_literals;

ClockSkewGuard guard(std::optional<std::chrono::nanoseconds> skew, std::shared_ptr<Clock> clock = nullptr,
                     std::chrono::nanoseconds refresh = 30s) {
  return {"x::ClaimerOptions", "claim_ttl", "X server", 10min, skew, refresh, std::move(clock)};
}

std::string invalid(std::optional<std::chrono::nanoseconds> skew, std::chrono::nanoseconds refresh = 30s) {
  try {
    (void)guard(skew, nullptr, refresh);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ClockSkewGuard, DefaultsToAQuarterOfTheTtlAndDeduplicatesWhatIsLeft) {
  const ClockSkewGuard defaults = guard(std::nullopt);
  EXPECT_EQ(defaults.max_clock_skew(), 150s);
  EXPECT_EQ(defaults.dedup_window(), 5min);  // 10 min - 2 × 2m30s
  EXPECT_EQ(guard(1min).dedup_window(), 8min);
}

TEST(ClockSkewGuard, RefusesABoundThatIsNotPositiveOrNotBelowHalfTheTtl) {
  EXPECT_EQ(invalid(0s), "x::ClaimerOptions.max_clock_skew: 0s is not positive");
  EXPECT_EQ(invalid(5min), "x::ClaimerOptions.max_clock_skew: 5m0s is not below claim_ttl / 2 (5m0s): two replicas at "
                           "opposite ends of the guard could both claim a fire");
  EXPECT_NE(invalid(std::chrono::nanoseconds::max()).find("is not below claim_ttl / 2"), std::string::npos);  // no overflow
  EXPECT_EQ(invalid(1min, 0s), "x::ClaimerOptions.skew_refresh_interval: 0s is out of range 1ms..1h");
  EXPECT_EQ(invalid(1min, 2h), "x::ClaimerOptions.skew_refresh_interval: 2h0m0s is out of range 1ms..1h");
  EXPECT_EQ(invalid(std::chrono::nanoseconds{5min - 1ns}), "accepted");
}

TEST(ClockSkewGuard, AnOffsetBeyondTheBoundIsRefusedNamingTheStoreAndTheDirection) {
  const ClockSkewGuard g = guard(1min);
  EXPECT_FALSE(g.beyond(60s));
  EXPECT_TRUE(g.beyond(60s + 1us));
  EXPECT_TRUE(g.beyond(-(60s + 1us)));
  EXPECT_EQ(g.skew_refusal(90s), "local clock is 1m30s behind the X server's, beyond max_clock_skew 1m0s");
  EXPECT_EQ(g.skew_refusal(-90s), "local clock is 1m30s ahead of the X server's, beyond max_clock_skew 1m0s");
}

TEST(ClockSkewGuard, AFireScheduledBeforeAResetPlusTheBoundIsARefusedReset) {
  const ClockSkewGuard g = guard(1min);
  const Instant reset = parse_rfc3339("2026-01-05T12:00:00Z");
  EXPECT_TRUE(g.before_reset(reset + 1min - 1ns, reset));
  EXPECT_FALSE(g.before_reset(reset + 1min, reset));
  EXPECT_EQ(g.reset_refusal("bucket B's creation", reset, "why"),
            "scheduled before bucket B's creation 2026-01-05T12:00:00Z + max_clock_skew 1m0s: why; not claimed again");
  EXPECT_NE(g.epoch_refusal(reset).find("scheduled before the claim store's reset epoch 2026-01-05T12:00:00Z"),
            std::string::npos);
}

TEST(ClockSkewGuard, KeepsTheLatestMeasurementAndCallsItStaleAfterTheRefreshInterval) {
  auto clock = std::make_shared<VirtualClock>(parse_rfc3339("2026-01-05T12:00:00Z"));
  ClockSkewGuard g = guard(1min, clock, 30s);
  EXPECT_FALSE(g.last_offset());
  EXPECT_FALSE(g.fresh_offset());
  const auto first = clock->steady_now();
  g.remember(3s, first);
  clock->advance(10s);
  g.remember(-2s, clock->steady_now());
  g.remember(7s, first);  // measured before the one kept: an answer that came late
  ASSERT_TRUE(g.fresh_offset());
  EXPECT_EQ(g.fresh_offset()->offset, -2s);
  clock->advance(30s);
  EXPECT_FALSE(g.fresh_offset());  // time to measure again
  ASSERT_TRUE(g.last_offset());
  EXPECT_EQ(g.last_offset()->offset, -2s);  // still the best known
}

}  // namespace
}  // namespace fleetcron::backend
