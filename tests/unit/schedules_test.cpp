// Programmatic schedules and the enumeration helpers.
#include "fleetcron/schedule.h"

#include <gtest/gtest.h>

#include "fleetcron/duration.h"
#include "test_util.h"

namespace fleetcron {
namespace {

using namespace std::chrono_literals;
using test::at;

TEST(Every, IsAnchoredAtItsStartWhenChained) {
  const auto s = every(90s);
  EXPECT_EQ(next_n(*s, at("2026-01-01T00:00:00Z"), 3),
            (std::vector{at("2026-01-01T00:01:30Z"), at("2026-01-01T00:03:00Z"), at("2026-01-01T00:04:30Z")}));
  EXPECT_EQ(s->next(at("2026-01-01T00:00:00.123Z")), at("2026-01-01T00:01:30.123Z"));
}

TEST(Every, WithAnAnchorFiresOnItsGrid) {
  const auto s = every(1h, at("2026-01-01T00:15:00Z"));
  EXPECT_EQ(s->next(at("2026-01-01T03:00:00Z")), at("2026-01-01T03:15:00Z"));
  EXPECT_EQ(s->next(at("2026-01-01T03:15:00Z")), at("2026-01-01T04:15:00Z"));
  EXPECT_EQ(s->next(at("2025-12-31T22:20:00Z")), at("2025-12-31T23:15:00Z"));  // before the anchor
}

TEST(AlignedEvery, AgreesAcrossReplicas) {
  const auto s = aligned_every(24h);
  EXPECT_EQ(s->next(at("2026-06-15T12:34:56Z")), at("2026-06-16T00:00:00Z"));
  EXPECT_EQ(aligned_every(15min)->next(at("2026-06-15T12:34:56Z")), at("2026-06-15T12:45:00Z"));
  EXPECT_EQ(aligned_every(15min)->next(at("2026-06-15T12:45:00Z")), at("2026-06-15T13:00:00Z"));
}

TEST(Intervals, RejectBelowOneMillisecond) {
  EXPECT_THROW((void)every(999us), std::invalid_argument);
  EXPECT_THROW((void)every(0s, at("2026-01-01T00:00:00Z")), std::invalid_argument);
  EXPECT_THROW((void)aligned_every(-1s), std::invalid_argument);
  EXPECT_NO_THROW((void)every(1ms));
  EXPECT_THROW((void)every(max_interval + 1ns), std::invalid_argument);
  EXPECT_NO_THROW((void)every(max_interval));
}

TEST(OnceAt, FiresOnce) {
  const auto s = once_at(at("2026-07-01T00:00:00Z"));
  EXPECT_EQ(s->next(at("2026-01-01T00:00:00Z")), at("2026-07-01T00:00:00Z"));
  EXPECT_EQ(s->next(at("2026-07-01T00:00:00Z")), std::nullopt);
}

TEST(Manual, NeverFires) {
  const auto s = manual();
  EXPECT_TRUE(s->is_manual());
  EXPECT_EQ(s->next(at("2026-01-01T00:00:00Z")), std::nullopt);
  EXPECT_FALSE(parse_schedule("@daily")->is_manual());
}

TEST(UnionOf, MergesAndFiresCoincidentInstantsOnce) {
  const auto s = union_of({parse_schedule("0 * * * *"), parse_schedule("30 * * * *"), parse_schedule("0 */2 * * *")});
  EXPECT_EQ(next_n(*s, at("2026-01-01T00:00:00Z"), 4),
            (std::vector{at("2026-01-01T00:30:00Z"), at("2026-01-01T01:00:00Z"), at("2026-01-01T01:30:00Z"),
                         at("2026-01-01T02:00:00Z")}));
  EXPECT_THROW((void)union_of({}), std::invalid_argument);
  EXPECT_THROW((void)union_of({manual(), nullptr}), std::invalid_argument);
}

TEST(Filter, KeepsMatchingInstants) {
  const auto weekdays_only = filter(parse_schedule("0 12 * * *"), [](Instant t) {
    const std::chrono::weekday w{std::chrono::floor<std::chrono::days>(t)};
    return w != std::chrono::Saturday && w != std::chrono::Sunday;
  });
  // 2026-01-02 is a Friday.
  EXPECT_EQ(next_n(*weekdays_only, at("2026-01-02T13:00:00Z"), 2),
            (std::vector{at("2026-01-05T12:00:00Z"), at("2026-01-06T12:00:00Z")}));
  const auto nothing = filter(parse_schedule("* * * * *"), [](Instant) { return false; });
  EXPECT_EQ(nothing->next(at("2026-01-01T00:00:00Z")), std::nullopt);  // gives up after filter_scan_limit
  EXPECT_THROW((void)filter(nullptr, [](Instant) { return true; }), std::invalid_argument);
  EXPECT_THROW((void)filter(manual(), {}), std::invalid_argument);
}

TEST(Enumerate, NextNAndBetween) {
  const auto s = parse_schedule("0 * * * *");
  EXPECT_EQ(next_n(*s, at("2026-01-01T00:00:00Z"), 0).size(), 0u);
  EXPECT_EQ(next_n(*once_at(at("2026-01-01T05:00:00Z")), at("2026-01-01T00:00:00Z"), 10).size(), 1u);
  // (a, b]: excludes a, includes b.
  EXPECT_EQ(between(*s, at("2026-01-01T00:00:00Z"), at("2026-01-01T03:00:00Z")),
            (std::vector{at("2026-01-01T01:00:00Z"), at("2026-01-01T02:00:00Z"), at("2026-01-01T03:00:00Z")}));
  EXPECT_THROW((void)next_n(*s, at("2026-01-01T00:00:00Z"), enumerate_limit + 1), std::invalid_argument);
  EXPECT_THROW((void)between(*every(1ms), at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")), std::length_error);
}

class Stuck final : public Schedule {
 public:
  std::optional<Instant> next(Instant after) const noexcept override { return after; }
};

TEST(Enumerate, RefusesASchedulThatDoesNotAdvance) {
  Stuck stuck;
  EXPECT_THROW((void)next_n(stuck, at("2026-01-01T00:00:00Z"), 3), std::logic_error);
  EXPECT_THROW((void)between(stuck, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")), std::logic_error);
}

}  // namespace
}  // namespace fleetcron

namespace fleetcron {
namespace {

// Regression (fuzzer, UBSan): after + interval overflowed int64 nanoseconds
// for a ~99-year interval near the end of the supported range.
TEST(Intervals, NeverOverflowNearTheEndOfTheRange) {
  using namespace std::chrono;
  const auto near_end = max_supported_instant - hours{1};
  const nanoseconds huge = parse_duration("876000h");  // ~100 years
  EXPECT_EQ(every(huge)->next(near_end), std::nullopt);
  EXPECT_EQ(every(huge, min_supported_instant)->next(near_end), std::nullopt);
  EXPECT_EQ(aligned_every(huge)->next(near_end), std::nullopt);
  EXPECT_EQ(every(hours{2})->next(near_end), std::nullopt);
  EXPECT_EQ(every(minutes{30})->next(near_end), near_end + minutes{30});
  EXPECT_THROW((void)every(hours{1}, Instant{} - hours{1}), std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron
