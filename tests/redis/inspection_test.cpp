// redis::read_lease and redis::scan_claims against a real redis-server:
// what `fleetcron status` shows, read without writing.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/inspection.h"
#include "redis/commands.h"
#include "redis_server.h"

namespace fleetcron::redis {
namespace {

TEST(RedisInspection, ReadsTheLeaseHolderTermAndExpiry) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  const std::string key = test::unique_prefix() + "leader";
  EXPECT_FALSE(read_lease(*client, key).holder);
  Elector elector(client, {.leader_key = key});
  ASSERT_EQ(elector.is_leader().status, Leadership::Status::leader);
  const LeaseRecord lease = read_lease(*client, key);
  ASSERT_TRUE(lease.holder);
  EXPECT_EQ(*lease.holder, elector.identity());
  ASSERT_TRUE(lease.term);
  EXPECT_EQ(*lease.term, std::to_string(elector.state().term));
  EXPECT_GT(lease.expires_in.count(), 0);
  EXPECT_LE(lease.expires_in, std::chrono::milliseconds{30'000});
}

TEST(RedisInspection, ScansTheClaimsUnderAPrefixTakenLiterally) {
  auto client = std::make_shared<Client>(parse_uri(test::shared_redis_uri()).connection);
  // Glob characters in the prefix are literal: the decoy matches the
  // prefix read as a pattern ([b] is "b"), not as text.
  const std::string prefix = test::unique_prefix() + "a[b]*?:";
  test::seed_store_epoch(test::shared_redis_uri(), prefix);
  Claimer claimer(client, {.claim_prefix = prefix});
  const ClaimResult first = claimer.claim("job@2026-01-02T15:04:05Z");
  ASSERT_EQ(first.status, ClaimResult::Status::claimed);
  ASSERT_EQ(claimer.claim("job@2026-01-02T15:05:05Z").status, ClaimResult::Status::claimed);
  const std::string decoy = prefix.substr(0, prefix.size() - 7) + "abxx:job@2026-01-02T15:04:05Z";
  ASSERT_EQ(client->impl().command({"SET", decoy, "1"}).text, "OK");
  std::set<std::string> seen;
  const std::size_t scanned = scan_claims(*client, prefix, [&](std::string_view fire_key) {
    seen.emplace(fire_key);
  });
  EXPECT_EQ(seen, (std::set<std::string>{"job@2026-01-02T15:04:05Z", "job@2026-01-02T15:05:05Z"}));
  EXPECT_EQ(scanned, 2u);  // the fence and epoch keys have no '@' and do not match
  // Read only: the claim still holds its fence.
  EXPECT_EQ(client->impl().command({"GET", prefix + "job@2026-01-02T15:04:05Z"}).text, std::to_string(first.fence));
}

TEST(RedisInspection, AnErrorReplyIsABackendErrorNamingTheServer) {
  test::RedisServer server({.password = "s3cret"});
  auto client = std::make_shared<Client>(parse_uri(server.uri()).connection);
  try {
    (void)read_lease(*client, "cron:leader");
    FAIL() << "no error";
  } catch (const AuthError& e) {
    EXPECT_NE(std::string(e.what()).find("NOAUTH"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fleetcron::redis
