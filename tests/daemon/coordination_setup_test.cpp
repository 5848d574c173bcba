// The daemon's coordination wrappers keep what the scheduler relies on.
#include <gtest/gtest.h>

#include <sstream>

#include "daemon/coordination_setup.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

// Regression (found by tests/chaos): the metrics wrapper did not forward
// dedup_window(), so a daemon paused past the claim TTL claimed and ran
// fires again after the other replicas' claims had expired.
TEST(CoordinationSetup, ClaimersKeepTheirDedupWindow) {
  Metrics metrics;
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  Settings memory;
  memory.claim_ttl = 10s;
  EXPECT_EQ(make_coordination(memory, metrics, log).claimer->dedup_window(), 10s);
  Settings redis;
  redis.coordinator = "redis://127.0.0.1:1/0";  // connects lazily: nothing is dialled here
  redis.claim_ttl = 10s;
  EXPECT_EQ(make_coordination(redis, metrics, log).claimer->dedup_window(), 5s);  // ttl - 2 * ttl/4
}

}  // namespace
}  // namespace fleetcron::daemon
