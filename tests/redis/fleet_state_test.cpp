// redis::FleetState beyond the contract (tests/conformance/): what it does
// with a key it did not write, an unreachable server and bad options.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fleetcron/redis/fleet_state.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/time.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

TEST(RedisFleetState, AKeyHoldingSomethingElseIsAnErrorNamingItAndIsLeftAlone) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()));
  FleetState state(client, {.fleet_prefix = test::unique_prefix() + "fleet:"});
  const std::string key = state.cursor_key("job");
  ASSERT_EQ(client->impl().command({"SET", key, "not a cursor"}).text, "OK");
  const CursorRead read = state.read_cursor("job");
  ASSERT_EQ(read.status, CursorRead::Status::error);
  EXPECT_NE(read.error.find(key), std::string::npos) << read.error;
  const Instant at = test::real_now();
  const CursorAdvance advance = state.advance_cursor("job", at, 1, 1h);
  ASSERT_EQ(advance.status, CursorAdvance::Status::error);
  EXPECT_NE(advance.error.find("NOTCURSOR"), std::string::npos) << advance.error;
  EXPECT_EQ(state.claim_catch_up("job", std::nullopt, at, 1, 1h, "r").status, CatchUpClaim::Status::error);
  EXPECT_EQ(client->impl().command({"GET", key}).text, "not a cursor");  // nothing overwrote it
}

TEST(RedisFleetState, AnUnreachableServerIsAnErrorResultNotAnException) {
  auto client = std::make_shared<Client>(parse_uri("redis://127.0.0.1:1"));
  FleetState state(client);
  const Instant at = test::real_now();
  const CursorRead read = state.read_cursor("job");
  EXPECT_EQ(read.status, CursorRead::Status::error);
  EXPECT_NE(read.error.find("127.0.0.1:1"), std::string::npos) << read.error;
  EXPECT_EQ(state.advance_cursor("job", at, 1, 1h).status, CursorAdvance::Status::error);
  EXPECT_EQ(state.claim_catch_up("job", std::nullopt, at, 1, 1h, "r").status, CatchUpClaim::Status::error);
}

TEST(RedisFleetState, OptionsAreCheckedAndKeysLiveUnderTheFleetPrefix) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()));
  EXPECT_THROW(FleetState(nullptr), std::invalid_argument);
  EXPECT_THROW(FleetState(client, {.fleet_prefix = ""}), std::invalid_argument);
  FleetState state(client);
  EXPECT_EQ(state.options().fleet_prefix, "cron:fleet:");
  EXPECT_EQ(state.cursor_key("nightly"), "cron:fleet:cursor:{nightly}");
}

}  // namespace
}  // namespace fleetcron::redis
