// The daemon's coordination wrappers keep what the scheduler relies on.
#include <gtest/gtest.h>

#include <sstream>

#include "daemon/backends/backend.h"
#include "daemon/backends/nats_backend.h"
#include "daemon/cli/commands.h"
#include "daemon/run/coordination_setup.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

// Regression (found by tests/chaos): the metrics wrapper did not forward
// dedup_window(), so a daemon paused past the claim TTL claimed and ran
// fires again after the other replicas' claims had expired.
TEST(CoordinationSetup, ClaimersKeepTheirDedupWindow) {
  Metrics metrics;
  Settings memory;
  memory.claim_ttl = 10s;
  EXPECT_EQ(make_coordination(memory, metrics).claimer->dedup_window(), 10s);
  Settings redis;
  redis.coordinator = "redis://127.0.0.1:1/0";  // connects lazily: nothing is dialled here
  redis.claim_ttl = 10s;
  EXPECT_EQ(make_coordination(redis, metrics).claimer->dedup_window(), 5s);  // ttl - 2 * ttl/4
  // NATS is built the same way with no server: it fails closed until one answers.
  Settings nats;
  nats.coordinator = "nats://127.0.0.1:1";
  nats.claim_ttl = 10s;
  const auto coordination = make_coordination(nats, metrics);
  EXPECT_EQ(coordination.claimer->dedup_window(), 5s);
  EXPECT_EQ(coordination.claimer->claim("k@2036-01-01T00:00:00Z").status, ClaimResult::Status::error);
  EXPECT_THROW(coordination.diagnostics->ping(), ConnectError);
  // Every backend has diagnostics; nothing measured yet here (no clock
  // offset), and memory has no store clock to measure.
  Settings postgres;
  postgres.coordinator = "postgres://u@127.0.0.1:1/db";  // lazily too
  for (const Settings* settings : {&memory, &redis, &nats, &postgres}) {
    const auto built = make_coordination(*settings, metrics);
    ASSERT_NE(built.diagnostics, nullptr) << settings->coordinator;
    EXPECT_FALSE(built.diagnostics->clock_offset()) << settings->coordinator;
    EXPECT_NE(built.claimer, nullptr) << settings->coordinator;
    EXPECT_NE(built.fleet_state, nullptr) << settings->coordinator;  // catch-up is on by default
  }
  EXPECT_NO_THROW(make_coordination(memory, metrics).diagnostics->ping());
  // Only Redis has a configuration to check (its maxmemory-policy); the
  // others answer that there is none, without asking anything.
  EXPECT_FALSE(make_coordination(memory, metrics).diagnostics->check_config());
  EXPECT_FALSE(make_coordination(nats, metrics).diagnostics->check_config());
  const auto unreachable = make_coordination(redis, metrics).diagnostics->check_config();
  ASSERT_TRUE(unreachable);
  EXPECT_FALSE(unreachable->answered);
  EXPECT_FALSE(unreachable->safe);
}

// The coordinator setting picks one backend; an unknown one is refused
// naming every form, without the password it may carry.
TEST(CoordinationSetup, TheCoordinatorPicksOneBackendAndAnUnknownOneNamesThemAll) {
  EXPECT_EQ(backend_for("memory").name(), "memory");
  EXPECT_TRUE(backend_for("memory").in_process());
  for (const char* redis : {"redis://h", "rediss://h", "redis-sentinel://h", "unix:/run/redis.sock"}) {
    EXPECT_EQ(backend_for(redis).name(), "Redis") << redis;
  }
  EXPECT_EQ(backend_for("nats://h").name(), "NATS");
  EXPECT_EQ(backend_for("tls://h").name(), "NATS");
  EXPECT_EQ(backend_for("postgresql://h/db").name(), "PostgreSQL");
  EXPECT_TRUE(backend_for("redis://h").checks_config());
  EXPECT_FALSE(backend_for("nats://h").checks_config());
  EXPECT_FALSE(backend_for("postgres://h/db").in_process());
  try {
    (void)backend_for("ftp://user:secret@h");
    FAIL() << "an unknown coordinator was accepted";
  } catch (const SettingsError& e) {
    EXPECT_STREQ(e.what(), "coordinator \"ftp://***@h\": expected memory, redis://…, rediss://…, redis-sentinel://…, "
                           "rediss-sentinel://…, unix:…, nats://…, tls://… or postgres://…, postgresql://…");
  }
}

// What replicas compare: the same shape on every backend, where each keeps
// its claims and its lease, defaults resolved.
TEST(CoordinationSetup, DedupSettingsNameWhereEachBackendKeepsClaimsAndTheLease) {
  Settings settings;
  settings.coordination = CoordinationMode::both;
  settings.claim_ttl = 20s;
  const auto names = [](const std::vector<ReplicaSetting>& list) {
    std::vector<std::string> out;
    for (const auto& setting : list) out.push_back(setting.name + "=" + setting.value);
    return out;
  };
  settings.coordinator = "redis://h";
  EXPECT_EQ(names(dedup_settings(settings)),
            (std::vector<std::string>{"mode=both", "claim_ttl=20s", "max_clock_skew=5s", "claim_prefix=cron:claim:",
                                      "leader_ttl=30s", "leader_key=cron:leader"}));
  settings.coordinator = "unix:/run/redis/redis.sock";  // Redis too (was taken for NATS's shape before)
  EXPECT_EQ(names(dedup_settings(settings))[3], "claim_prefix=cron:claim:");
  settings.coordinator = "nats://h?bucket=B&key=k&leader_bucket=L&replicas=3";
  EXPECT_EQ(names(dedup_settings(settings)),
            (std::vector<std::string>{"mode=both", "claim_ttl=20s", "max_clock_skew=5s", "claim_bucket=B",
                                      "leader_ttl=10s", "leader_key=k", "leader_bucket=L"}));
  settings.coordinator = "postgres://h/db?leader_name=n";
  settings.coordination = CoordinationMode::leader;
  EXPECT_EQ(names(dedup_settings(settings)),
            (std::vector<std::string>{"mode=leader", "leader_ttl=30s", "leader_table=cron_leader", "leader_key=n"}));
  settings.coordinator = "memory";
  settings.coordination = CoordinationMode::claim;
  EXPECT_EQ(names(dedup_settings(settings)), (std::vector<std::string>{"mode=claim", "claim_ttl=20s", "max_clock_skew=5s"}));
}

// The offline claimer `validate` checks with has the real one's rules.
TEST(CoordinationSetup, OfflineClaimersHaveTheRealWindowAndKeyRules) {
  Settings redis;
  redis.coordinator = "redis://127.0.0.1:1/0";
  redis.claim_ttl = 10s;
  EXPECT_EQ(make_offline_claimer(redis)->dedup_window(), 5s);
  Settings nats;
  nats.coordinator = "nats://127.0.0.1:1";
  nats.claim_ttl = 10s;
  auto claimer = make_offline_claimer(nats);
  EXPECT_EQ(claimer->dedup_window(), 5s);
  EXPECT_NO_THROW(claimer->check_entry_key(std::string(600, 'a')));
  EXPECT_THROW(claimer->check_entry_key(std::string(700, '.')), std::invalid_argument);  // 3 bytes each
  EXPECT_EQ(claimer->claim("k@2026-01-01T00:00:00Z").status, ClaimResult::Status::error);
  nats.coordination = CoordinationMode::leader;
  EXPECT_EQ(make_offline_claimer(nats), nullptr);
}

// A lease hiccup in both mode must not kill runs that hold a valid claim.
TEST(Settings, LeadershipLossFinishesInBothModeAndCancelsInLeaderMode) {
  Settings settings;
  settings.coordination = CoordinationMode::both;
  EXPECT_EQ(effective_leadership_loss(settings), LeadershipLoss::finish);
  settings.coordination = CoordinationMode::leader;
  EXPECT_EQ(effective_leadership_loss(settings), LeadershipLoss::cancel);
  apply_config_text("on_leadership_loss = \"finish\"\n", "c.toml", settings);
  EXPECT_EQ(effective_leadership_loss(settings), LeadershipLoss::finish);
  try {
    apply_config_text("on_leadership_loss = \"later\"\n", "c.toml", settings);
    FAIL();
  } catch (const SettingsError& e) {
    EXPECT_STREQ(e.what(), "c.toml:1: on_leadership_loss \"later\": expected cancel or finish");
  }
}

// Regression (found by fuzz/coordinator_uri_fuzz): the query was split off
// at the first '?' before the userinfo, so a password with '?' ended up in
// the host list and the "unknown option" error.
TEST(Settings, TheFleetSectionAndTheFleetPrefixFollowingTheClaimPrefix) {
  Settings settings;
  EXPECT_EQ(effective_fleet_prefix(settings), "cron:fleet:");
  EXPECT_EQ(settings.catch_up, std::chrono::hours{24 * 7});
  EXPECT_FALSE(settings.catch_up_beyond_claim_ttl);
  settings.claim_prefix = "teamA:claim:";
  EXPECT_EQ(effective_fleet_prefix(settings), "teamA:fleet:");  // two fleets apart by claim prefix stay apart
  settings.claim_prefix = "teamB:";
  EXPECT_EQ(effective_fleet_prefix(settings), "teamB:fleet:");
  apply_config_text("[fleet]\nprefix = \"x:\"\ncatch_up = \"36h\"\ncatch_up_beyond_claim_ttl = true\n", "c.toml", settings);
  EXPECT_EQ(effective_fleet_prefix(settings), "x:");
  EXPECT_EQ(settings.catch_up, std::chrono::hours{36});
  EXPECT_TRUE(settings.catch_up_beyond_claim_ttl);
  apply_config_text("[fleet]\ncatch_up = \"0\"\n", "c.toml", settings);
  EXPECT_EQ(settings.catch_up, std::chrono::nanoseconds::zero());
  try {
    apply_config_text("[fleet]\ncatch_up = \"-1h\"\n", "c.toml", settings);
    ADD_FAILURE() << "a negative catch_up was accepted";
  } catch (const SettingsError& e) {
    EXPECT_NE(std::string(e.what()).find("c.toml:2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fleet.catch_up"), std::string::npos) << e.what();
  }
}

TEST(CoordinationSetup, NatsPasswordsKeepQuestionMarksSlashesAndCommas) {
  Settings settings;
  const auto options = parse_nats_uri("nats://alice:pa?ss/wo,rd@127.0.0.1:4222,127.0.0.1:4223?bucket=B", settings);
  EXPECT_EQ(options.user, "alice");
  EXPECT_EQ(options.password, "pa?ss/wo,rd");
  EXPECT_EQ(options.servers, (std::vector<std::string>{"nats://127.0.0.1:4222", "nats://127.0.0.1:4223"}));
  EXPECT_EQ(settings.claim_bucket, "B");
  try {
    (void)parse_nats_uri("nats://alice:pa?ss/wo,rd@127.0.0.1:4222?colour=red", settings);
    FAIL() << "an unknown option was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "NATS URI \"nats://***@127.0.0.1:4222?colour=red\": option colour: unknown (known: "
                                     "bucket, leader_bucket, key, replicas, connect_timeout, request_timeout, tls_ca_file, "
                                     "tls_cert_file, tls_key_file)");
  }
}

TEST(CoordinationSetup, NatsTlsFilesAreNamedAsInTheRedisUri) {
  Settings settings;
  const auto options = parse_nats_uri("nats://a:4222?bucket=B&tls_ca_file=/etc/ssl/fleet%20ca.pem", settings);
  EXPECT_TRUE(options.tls.enabled) << "a CA file turns TLS on";
  EXPECT_EQ(options.tls.ca_file, "/etc/ssl/fleet ca.pem");
  EXPECT_TRUE(options.tls.cert_file.empty());
  // A client certificate without its key is refused where the options are checked (Connection::connect).
  const auto client = parse_nats_uri("tls://a:4222?tls_cert_file=/c.pem&tls_key_file=/c.key", settings);
  EXPECT_EQ(client.tls.cert_file, "/c.pem");
  EXPECT_EQ(client.tls.key_file, "/c.key");
}

TEST(CoordinationSetup, NatsReplicasAreTheBucketsAndBounded) {
  Settings settings;
  EXPECT_EQ(settings.nats_replicas, 1);
  (void)parse_nats_uri("nats://a:4222,b:4222,c:4222?replicas=3", settings);
  EXPECT_EQ(settings.nats_replicas, 3);
  for (const char* bad : {"nats://a?replicas=0", "nats://a?replicas=6", "nats://a?replicas=three"}) {
    try {
      (void)parse_nats_uri(bad, settings);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("option replicas: \"") , std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not a number of replicas 1..5"), std::string::npos) << e.what();
    }
  }
}

// A leader record is whatever someone wrote to the bucket: fleetcron status
// shows it on one line, with nothing a terminal would act on.
TEST(CoordinationSetup, StatusShowsAHostileLeaderRecordEscapedOnOneLine) {
  nats::Entry entry;
  entry.value = "evil\n\x1b[31mleader: me \xC2\x9B" "2J \xE2\x80\xAE" "gnp";
  entry.revision = 7;
  EXPECT_EQ(describe_leader_record(entry),
            "leader: \"evil\\n\\u001b[31mleader: me \\u009b2J \\u202egnp\" (last renewed at revision 7)\n");
  EXPECT_EQ(describe_leader_record(std::nullopt), "leader: none\n");
  entry.operation = nats::Entry::Operation::remove;
  EXPECT_EQ(describe_leader_record(entry), "leader: none\n");
}

}  // namespace
}  // namespace fleetcron::daemon
