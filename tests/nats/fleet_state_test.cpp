// nats::FleetState beyond the contract: its bucket's TTL, foreign values,
// a bucket deleted under it. A real nats-server.
#include <gtest/gtest.h>

#include "fleetcron/nats/fleet_state.h"
#include "fleetcron/rfc3339.h"
#include "nats_server.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

const Instant at_noon = parse_rfc3339("2026-01-05T12:00:00Z");

struct StateBucket {
  std::shared_ptr<nats::Connection> connection =
      nats::Connection::connect(nats::ConnectionOptions{.servers = {shared_nats_url()}});
  std::string name = unique_bucket();
};

TEST(NatsFleetState, ABucketKeepingValuesShorterThanACursorMustLiveIsAnErrorNamingBoth) {
  StateBucket store;
  nats::FleetState state(store.connection->bucket(nats::BucketConfig{.name = store.name, .ttl = 1h}));
  const CursorAdvance advance = state.advance_cursor("job", at_noon, 1, 30 * 24h);
  ASSERT_EQ(advance.status, CursorAdvance::Status::error);
  EXPECT_NE(advance.error.find(store.name + " keeps values 1h"), std::string::npos) << advance.error;
  EXPECT_NE(advance.error.find("720h"), std::string::npos) << advance.error;
  EXPECT_EQ(state.advance_cursor("job", at_noon, 1, 1h).status, CursorAdvance::Status::moved);  // within its TTL
}

TEST(NatsFleetState, AValueThatIsNotACursorIsAnErrorAndIsNeverOverwritten) {
  StateBucket store;
  auto bucket = store.connection->bucket(nats::state_bucket_config(store.name));
  nats::FleetState state(bucket);
  (void)bucket->put(nats::FleetState::cursor_key("job"), "hello");
  const CursorRead read = state.read_cursor("job");
  ASSERT_EQ(read.status, CursorRead::Status::error);
  EXPECT_NE(read.error.find("not a cursor"), std::string::npos) << read.error;
  EXPECT_EQ(state.advance_cursor("job", at_noon, 1, 24h).status, CursorAdvance::Status::error);
  EXPECT_EQ(state.claim_catch_up("job", std::nullopt, at_noon, 1, 24h, "r").status, CatchUpClaim::Status::error);
  EXPECT_EQ(bucket->get(nats::FleetState::cursor_key("job"))->value, "hello");
}

TEST(NatsFleetState, ABucketDeletedUnderItIsCreatedAgainAndItsCursorsAreGone) {
  StateBucket store;
  nats::FleetState state(store.connection->bucket(nats::state_bucket_config(store.name)));
  ASSERT_EQ(state.advance_cursor("job", at_noon, 1, 24h).status, CursorAdvance::Status::moved);
  store.connection->delete_bucket(store.name);
  const CursorRead read = state.read_cursor("job");
  ASSERT_EQ(read.status, CursorRead::Status::absent) << read.error;  // a job new to the store: nothing caught up
  EXPECT_EQ(state.advance_cursor("job", at_noon, 1, 24h).status, CursorAdvance::Status::moved);
}

TEST(NatsFleetState, KeysAreEncodedAsClaimsAreAndBoundedInLength) {
  EXPECT_EQ(nats::FleetState::cursor_key("backup.daily@x"), "cursor.backup=2Edaily=40x");
  StateBucket store;
  nats::FleetState state(store.connection->bucket(nats::state_bucket_config(store.name)));
  const CursorAdvance advance = state.advance_cursor(std::string(1000, '.'), at_noon, 1, 24h);
  ASSERT_EQ(advance.status, CursorAdvance::Status::error);
  EXPECT_NE(advance.error.find("2048-byte limit"), std::string::npos) << advance.error;
}

}  // namespace
}  // namespace fleetcron::test
