#include "core/support/log_quota.h"

#include <gtest/gtest.h>

namespace fleetcron::detail {
namespace {

using namespace std::chrono_literals;
using Kind = LogQuota::Kind;

TEST(LogQuota, LogsNPerWindowSaysWhichIsLastAndStartsAgainAfter) {
  LogQuota quota(3, 1min);
  const LogQuota::SteadyTime t0{1h};
  EXPECT_EQ(quota.take(t0).kind, Kind::logged);
  EXPECT_EQ(quota.take(t0 + 1s).kind, Kind::logged);
  EXPECT_EQ(quota.take(t0 + 2s).kind, Kind::last);
  EXPECT_EQ(quota.take(t0 + 3s).kind, Kind::quiet);
  EXPECT_EQ(quota.take(t0 + 59s).kind, Kind::quiet);
  const LogQuota::Take next = quota.take(t0 + 60s);
  EXPECT_EQ(next.kind, Kind::logged) << "a new window";
  EXPECT_EQ(next.left_out, 2u) << "the two quiet ones";
  EXPECT_EQ(quota.take(t0 + 61s).left_out, 0u);
  EXPECT_EQ(quota.take(t0 + 62s).kind, Kind::last);
  EXPECT_EQ(quota.take(t0 + 200s).left_out, 0u) << "none left out of that one";
}

}  // namespace
}  // namespace fleetcron::detail
