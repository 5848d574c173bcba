// The PostgreSQL backend on a real cluster: the schema and migrate, the
// reference's statements (libtnb/cron's postgrescoord, run here as Go runs
// them) against fleetcron's claimer and elector, fences, batches, the
// server-time window, store resets, and errors for bad URIs and credentials.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "fleetcron/backend_error.h"
#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/diagnostics.h"
#include "fleetcron/postgres/elector.h"
#include "fleetcron/postgres/uri.h"
#include "postgres_server.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<postgres::Connection> connect(const std::string& uri = shared_postgres_uri()) {
  return std::make_shared<postgres::Connection>(postgres::parse_uri(uri).connection);
}

// A fire key for an instant `offset` from now (the server's clock and ours agree here).
std::string key_at(const std::string& job, std::chrono::nanoseconds offset) {
  return fire_key(job, std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) + offset);
}

// The reference's claim, as libtnb/cron's Claimer sends it; true if it claimed.
bool go_claims(const postgres::TableNames& t, const std::string& key, double ttl_seconds = 600) {
  const std::string done =
      psql(shared_postgres_uri(), "WITH c AS (INSERT INTO " + t.claims + " (fire_key, holder, expires_at) VALUES ('" +
                                      key + "', 'gohost-0123456789abcdef', now() + (" + std::to_string(ttl_seconds) +
                                      " * interval '1 second')) ON CONFLICT (fire_key) DO UPDATE SET holder = "
                                      "EXCLUDED.holder, claimed_at = now(), expires_at = EXCLUDED.expires_at WHERE " +
                                      t.claims + ".expires_at < now() RETURNING 1) SELECT count(*) FROM c");
  return done == "1";
}

class PostgresBackend : public ::testing::Test {
 protected:
  void SetUp() override { (void)postgres::migrate(*connection_, tables_); }
  postgres::ClaimerOptions claimer_options() const { return {.tables = tables_, .claim_ttl = 10min}; }
  postgres::TableNames tables_ = unique_tables();
  std::shared_ptr<postgres::Connection> connection_ = connect();
};

// The store's diagnostics, as the daemon reads them: an answer, the
// claimer's clock offset, and what the schema lacks until migrate().
TEST(PostgresDiagnostics, AnswerClockOffsetAndTheMissingSchema) {
  const auto tables = unique_tables();
  auto connection = connect();
  auto claimer = std::make_shared<postgres::Claimer>(connection, postgres::ClaimerOptions{.tables = tables});
  const auto diagnostics = postgres::make_diagnostics(connection, tables, true, claimer);
  EXPECT_NO_THROW(diagnostics->ping());
  EXPECT_FALSE(diagnostics->check_config());
  EXPECT_EQ(diagnostics->missing_schema(), postgres::missing_schema(*connection, tables));
  EXPECT_EQ(diagnostics->missing_schema().size(), 10u);
  EXPECT_EQ(postgres::make_diagnostics(connection, tables, false)->missing_schema().size(), 6u)
      << "without the fleet state's 4 tables";
  (void)postgres::migrate(*connection, tables);
  EXPECT_TRUE(diagnostics->missing_schema().empty());
  EXPECT_FALSE(diagnostics->clock_offset()) << "PostgreSQL's claimer measures with its claims: none yet";
  const auto claimed = claimer->claim("diagnostics@2036-01-01T00:00:00Z");
  EXPECT_EQ(claimed.status, ClaimResult::Status::claimed) << claimed.error;
  const auto offset = diagnostics->clock_offset();
  ASSERT_TRUE(offset);
  EXPECT_LT(std::chrono::abs(offset->offset), 2s);
  EXPECT_FALSE(postgres::make_diagnostics(connection, tables, true)->clock_offset()) << "no claimer: nothing measures";
  EXPECT_THROW((void)postgres::make_diagnostics(nullptr, tables, true), std::invalid_argument);
}

TEST(PostgresSchema, MigrateCreatesTheReferenceTablesAndOursAndIsIdempotent) {
  const auto tables = unique_tables();
  auto connection = connect();
  const auto missing = postgres::missing_schema(*connection, tables);
  ASSERT_EQ(missing.size(), 10u);  // 4 reference and fence objects, 2 columns, 4 fleet-state tables
  EXPECT_EQ(missing.front(), "table " + tables.claims + " is missing: run `fleetcron migrate`");
  const auto first = postgres::migrate(*connection, tables);
  EXPECT_EQ(first.front(), "created table " + tables.claims);
  EXPECT_TRUE(postgres::missing_schema(*connection, tables).empty());
  const auto second = postgres::migrate(*connection, tables);
  EXPECT_EQ(second.front(), "kept table " + tables.claims);
  for (const auto& line : second) EXPECT_FALSE(line.starts_with("created")) << line;
  // The reference's columns, as its Migrate makes them.
  EXPECT_EQ(psql(shared_postgres_uri(),
                 "SELECT string_agg(column_name || ':' || data_type, ',' ORDER BY ordinal_position) "
                 "FROM information_schema.columns WHERE table_name = '" +
                     tables.claims + "'"),
            "fire_key:text,holder:text,claimed_at:timestamp with time zone,expires_at:timestamp with time zone,"
            "fence:bigint");
}

TEST(PostgresSchema, ATableMadeByTheGoMigrateIsReportedAndCompleted) {
  const auto tables = unique_tables();
  // libtnb/cron's Migrate: its two tables only.
  (void)psql(shared_postgres_uri(),
             "CREATE TABLE " + tables.claims +
                 " (fire_key text PRIMARY KEY, holder text NOT NULL, "
                 "claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)");
  (void)psql(shared_postgres_uri(), "INSERT INTO " + tables.claims +
                                        " (fire_key, holder, expires_at) VALUES "
                                        "('old@2026-01-01T00:00:00Z', 'go', now() + interval '1 hour')");
  auto connection = connect();
  const auto missing = postgres::missing_schema(*connection, tables, false);
  ASSERT_FALSE(missing.empty());
  EXPECT_NE(std::find_if(missing.begin(), missing.end(),
                         [&](const std::string& line) {
                           return line.starts_with("column " + tables.claims +
                                                   ".fence is missing: a table made by "
                                                   "libtnb/cron's Migrate");
                         }),
            missing.end());
  const auto done = postgres::migrate(*connection, tables);
  EXPECT_EQ(done.front(), "kept table " + tables.claims);
  // The existing row got a fence from the column's default.
  EXPECT_GT(std::stoull(psql(shared_postgres_uri(), "SELECT fence FROM " + tables.claims + " WHERE holder = 'go'")),
            1'700'000'000'000'000ull);
}

TEST_F(PostgresBackend, AGoReplicaAndAFleetcronReplicaNeverBothClaimAFire) {
  postgres::Claimer claimer(connection_, claimer_options());
  const std::string theirs = key_at("go-first", 0s);
  ASSERT_TRUE(go_claims(tables_, theirs));
  EXPECT_EQ(claimer.claim(theirs).status, ClaimResult::Status::already_claimed);
  const std::string ours = key_at("ours-first", 0s);
  ASSERT_EQ(claimer.claim(ours).status, ClaimResult::Status::claimed);
  EXPECT_FALSE(go_claims(tables_, ours));
  // The Go Cleanup keeps live claims and the epoch row.
  (void)psql(shared_postgres_uri(),
             "DELETE FROM " + tables_.claims + " WHERE expires_at < now() - interval '1 minute'");
  EXPECT_EQ(psql(shared_postgres_uri(), "SELECT count(*) FROM " + tables_.claims), "3");
}

TEST_F(PostgresBackend, AnExpiredClaimIsTakenOverByEitherSide) {
  postgres::Claimer claimer(connection_, claimer_options());
  const std::string key = key_at("expired", 0s);
  ASSERT_TRUE(go_claims(tables_, key, 0.000001));
  const ClaimResult taken_over = claimer.claim(key);
  ASSERT_EQ(taken_over.status, ClaimResult::Status::claimed);
  EXPECT_EQ(psql(shared_postgres_uri(), "SELECT fence FROM " + tables_.claims + " WHERE fire_key = '" + key + "'"),
            std::to_string(taken_over.fence));
}

// already_claimed() looks without claiming: a live row (ours or a Go
// replica's) is a claim, an expired one is not (a claim takes it over).
TEST_F(PostgresBackend, AlreadyClaimedLooksWithoutClaiming) {
  postgres::Claimer claimer(connection_, claimer_options());
  const std::string ours = key_at("look-ours", 0s), theirs = key_at("look-go", 0s);
  const std::string expired = key_at("look-expired", 0s), free = key_at("look-free", 0s);
  ASSERT_EQ(claimer.claim(ours).status, ClaimResult::Status::claimed);
  ASSERT_TRUE(go_claims(tables_, theirs));
  ASSERT_TRUE(go_claims(tables_, expired, 0.000001));
  const std::vector<std::string> keys{ours, free, theirs, expired};
  EXPECT_TRUE(claimer.tells_already_claimed());
  EXPECT_EQ(claimer.already_claimed(keys), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(psql(shared_postgres_uri(), "SELECT count(*) FROM " + tables_.claims + " WHERE fire_key = '" + free + "'"),
            "0");  // looking wrote nothing
  EXPECT_EQ(claimer.claim(free).status, ClaimResult::Status::claimed);
  EXPECT_TRUE(claimer.already_claimed(std::vector<std::string>{"  "}).empty());  // a key no claim could store tells nothing
}

TEST_F(PostgresBackend, FencesGrowAndAreAtLeastTheServerClockInMicroseconds) {
  postgres::Claimer claimer(connection_, claimer_options());
  const auto before_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() -
      1'000'000;
  std::uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const ClaimResult claim = claimer.claim(key_at("fence-" + std::to_string(i), 0s));
    ASSERT_EQ(claim.status, ClaimResult::Status::claimed) << claim.error;
    EXPECT_GT(claim.fence, last);
    EXPECT_GT(claim.fence, static_cast<std::uint64_t>(before_us));
    last = claim.fence;
  }
  // A row a Go replica inserts gets the next fence from the column's default.
  const std::string go_key = key_at("go-fence", 0s);
  ASSERT_TRUE(go_claims(tables_, go_key));
  EXPECT_GT(std::stoull(psql(shared_postgres_uri(),
                             "SELECT fence FROM " + tables_.claims + " WHERE fire_key = '" + go_key + "'")),
            last);
}

TEST_F(PostgresBackend, ABatchIsOneClaimPerDistinctFireAcrossStatements) {
  postgres::Claimer first(connection_, claimer_options());
  postgres::Claimer second(connect(), claimer_options());
  std::vector<std::string> keys;
  // One instant for all (a slow build could cross a second between calls of key_at).
  const Instant at = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  for (int i = 0; i < 2500; ++i) keys.push_back(fire_key("batch-" + std::to_string(i % 2400), at));  // 100 repeats
  const auto mine = first.claim_batch(keys);
  const auto theirs = second.claim_batch(keys);
  std::set<std::uint64_t> fences;
  int claimed = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (mine[i].status == ClaimResult::Status::claimed) {
      ++claimed;
      fences.insert(mine[i].fence);
    } else {
      EXPECT_EQ(mine[i].status, ClaimResult::Status::already_claimed) << i << ": " << mine[i].error;
    }
    EXPECT_EQ(theirs[i].status, ClaimResult::Status::already_claimed) << i << ": " << theirs[i].error;
  }
  EXPECT_EQ(claimed, 2400);
  EXPECT_EQ(fences.size(), 2400u);
}

// A local clock `offset` from the real one.
class OffsetClock final : public Clock {
 public:
  explicit OffsetClock(std::chrono::nanoseconds offset) : offset_(offset) {}
  Instant now() const noexcept override { return system_clock()->now() + offset_; }
  SteadyTime steady_now() const noexcept override { return system_clock()->steady_now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline) override {
    system_clock()->wait_until(cv, lock, deadline);
  }

 private:
  std::chrono::nanoseconds offset_;
};

TEST_F(PostgresBackend, TheServerRefusesClaimsFromALocalClockBeyondTheGuard) {
  for (const auto offset : {30s, -30s}) {
    postgres::Claimer skewed(connection_, {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 10s,
                                           .clock = std::make_shared<OffsetClock>(offset)});
    const ClaimResult claim = skewed.claim(key_at("skewed", 0s));
    EXPECT_EQ(claim.status, ClaimResult::Status::clock_skew);
    EXPECT_NE(claim.error.find(offset > 0s ? "ahead of the PostgreSQL server's, beyond max_clock_skew 10s"
                                           : "behind the PostgreSQL server's, beyond max_clock_skew 10s"),
              std::string::npos)
        << claim.error;
    ASSERT_TRUE(skewed.clock_offset().has_value());
    EXPECT_LT(std::chrono::abs(skewed.clock_offset()->offset + offset), 1s);
  }
  postgres::Claimer inside(connection_, {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 10s,
                                         .clock = std::make_shared<OffsetClock>(5s)});
  EXPECT_EQ(inside.claim(key_at("inside", 0s)).status, ClaimResult::Status::claimed);
  EXPECT_EQ(inside.dedup_window(), 40s);
}

TEST_F(PostgresBackend, ATruncatedClaimsTableIsAStoreResetAndRefusesOlderFires) {
  postgres::Claimer claimer(connection_, {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 5s});
  const std::string before = key_at("reset", -2s);
  ASSERT_EQ(claimer.claim(before).status, ClaimResult::Status::claimed);
  (void)psql(shared_postgres_uri(), "TRUNCATE " + tables_.claims);
  const ClaimResult again = claimer.claim(before);
  EXPECT_EQ(again.status, ClaimResult::Status::store_reset);
  EXPECT_NE(again.error.find("reset epoch"), std::string::npos) << again.error;
  EXPECT_EQ(claimer.resets_found(), 1u);
  // Another replica, which saw nothing, refuses it too: the epoch row says so.
  postgres::Claimer other(connect(), {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 5s});
  EXPECT_EQ(other.claim(before).status, ClaimResult::Status::store_reset);
  // Ten seconds later (the epoch moved back instead of waiting), a fire
  // scheduled after the epoch + max_clock_skew is claimed again.
  (void)psql(shared_postgres_uri(), "UPDATE " + tables_.claims +
                                        " SET claimed_at = claimed_at - interval '10 seconds' "
                                        "WHERE fire_key = 'fleetcron:epoch'");
  EXPECT_EQ(other.claim(key_at("after-reset", 2s)).status, ClaimResult::Status::claimed);
  EXPECT_EQ(other.resets_found(), 0u);
}

TEST_F(PostgresBackend, AClaimsTableDroppedAndMigratedAgainIsAStoreReset) {
  postgres::Claimer claimer(connection_, {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 5s});
  const std::string fire = key_at("dropped", -1s);
  ASSERT_EQ(claimer.claim(fire).status, ClaimResult::Status::claimed);
  (void)psql(shared_postgres_uri(), "DROP TABLE " + tables_.claims);
  (void)postgres::migrate(*connection_, tables_);  // the fence counter survived: the epoch is now
  postgres::Claimer late(connect(), {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 5s});
  EXPECT_EQ(late.claim(fire).status, ClaimResult::Status::store_reset);
}

TEST_F(PostgresBackend, AFenceCounterThatWentBackIsAStoreReset) {
  postgres::Claimer claimer(connection_, {.tables = tables_, .claim_ttl = 60s, .max_clock_skew = 5s});
  ASSERT_EQ(claimer.claim(key_at("counter", 0s)).status, ClaimResult::Status::claimed);
  (void)psql(shared_postgres_uri(), "UPDATE " + tables_.fence_table() + " SET value = 5");  // a restored backup
  EXPECT_EQ(claimer.claim(key_at("counter-2", -1s)).status, ClaimResult::Status::store_reset);
  EXPECT_EQ(claimer.resets_found(), 1u);
}

TEST_F(PostgresBackend, GoAndFleetcronElectorsShareOneLeaderAndTermsGrowOnEachNewHolder) {
  postgres::Elector ours(connection_, {.tables = tables_, .lease = {.lease_ttl = 2s}});
  const auto go_campaign = [&] {
    return psql(shared_postgres_uri(), "WITH l AS (INSERT INTO " + tables_.leader +
                                           " (name, holder, expires_at) VALUES ('default', "
                                           "'gohost-0123456789abcdef', now() + (2 * interval '1 second')) ON CONFLICT "
                                           "(name) DO UPDATE SET holder = "
                                           "EXCLUDED.holder, expires_at = EXCLUDED.expires_at WHERE " +
                                           tables_.leader +
                                           ".holder = EXCLUDED.holder "
                                           "OR " +
                                           tables_.leader +
                                           ".expires_at < now() RETURNING 1) SELECT count(*) FROM l") == "1";
  };
  ASSERT_TRUE(go_campaign());
  EXPECT_EQ(ours.is_leader().status, Leadership::Status::follower);
  (void)psql(shared_postgres_uri(), "UPDATE " + tables_.leader + " SET expires_at = now() - interval '1 second'");
  const Leadership first = ours.is_leader();
  ASSERT_EQ(first.status, Leadership::Status::leader) << first.error;
  EXPECT_FALSE(go_campaign());
  EXPECT_EQ(ours.is_leader().term, first.term);  // renewed: the same term
  const auto row = postgres::read_leader(*connection_, tables_, "default");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->holder, ours.identity());
  EXPECT_EQ(row->term, first.term);
  postgres::Elector next(connect(), {.tables = tables_, .lease = {.lease_ttl = 2s}});
  ours.resign();
  EXPECT_FALSE(postgres::read_leader(*connection_, tables_, "default").has_value());
  const Leadership second = next.is_leader();
  ASSERT_EQ(second.status, Leadership::Status::leader) << second.error;
  EXPECT_GT(second.term, first.term);
  ours.resign();  // not the holder: its conditional delete leaves the row alone
  EXPECT_EQ(postgres::read_leader(*connection_, tables_, "default")->holder, next.identity());
}

TEST(PostgresErrors, BadUrisNameWhatIsWrongAndNeverShowThePassword) {
  try {
    (void)postgres::parse_uri("postgres://u:s3cret@127.0.0.1/db?bogus_option=1");
    FAIL() << "accepted";
  } catch (const UriError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bogus_option"), std::string::npos) << what;
    EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
  }
  try {  // a password as a query parameter, and one with an unencoded '/' and '?'
    (void)postgres::parse_uri("postgres://u@127.0.0.1/db?password=s3cret&pool_size=x");
    FAIL() << "accepted";
  } catch (const UriError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
  try {
    (void)postgres::parse_uri("postgres://u:p/a?ss@127.0.0.1/db?pool_size=x");
    FAIL() << "accepted";
  } catch (const UriError& e) {
    EXPECT_EQ(std::string(e.what()).find("p/a?ss"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)postgres::parse_uri("mysql://127.0.0.1/db"), UriError);
  EXPECT_THROW((void)postgres::parse_uri("postgres://127.0.0.1/db?claims_table=bad-name"), UriError);
  EXPECT_THROW((void)postgres::parse_uri("postgres://127.0.0.1/db?pool_size=0"), UriError);
  try {  // the core's percent decoder, as the other backends'
    (void)postgres::parse_uri("postgres://127.0.0.1/db?leader_name=a%2");
    FAIL() << "accepted";
  } catch (const UriError& e) {
    EXPECT_NE(std::string(e.what()).find("bad percent-encoding in \"a%2\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(postgres::parse_uri("postgres://127.0.0.1/db?leader_name=night%20ly").leader_name, "night ly");
  const auto parsed = postgres::parse_uri(
      "postgresql://u:pw@127.0.0.1:5433/db?sslmode=disable&claims_table=ops.claims"
      "&leader_name=nightly&statement_timeout=2s");
  EXPECT_EQ(parsed.tables.claims, "ops.claims");
  EXPECT_EQ(parsed.leader_name, "nightly");
  EXPECT_EQ(parsed.connection.statement_timeout, 2000ms);
  EXPECT_EQ(postgres::describe(parsed.connection), "postgres://u@127.0.0.1:5433/db?sslmode=disable");
}

TEST(PostgresErrors, AWrongPasswordFailsClosedWithAClearErrorAndNoPassword) {
  std::string uri = shared_postgres_uri();
  const auto at = uri.find('@');
  const auto colon = uri.rfind(':', at);
  uri = uri.substr(0, colon + 1) + "not-the-password" + uri.substr(at);
  auto connection = connect(uri);
  EXPECT_THROW(connection->ping(), AuthError);
  postgres::Claimer claimer(connection, {.tables = unique_tables()});
  const ClaimResult claim = claimer.claim(key_at("denied", 0s));
  EXPECT_EQ(claim.status, ClaimResult::Status::error);
  EXPECT_NE(claim.error.find("password authentication failed"), std::string::npos) << claim.error;
  EXPECT_EQ(claim.error.find("not-the-password"), std::string::npos) << claim.error;
}

TEST(PostgresErrors, UnmigratedTablesFailClosedPointingAtMigrate) {
  postgres::Claimer claimer(connect(), {.tables = unique_tables()});
  const ClaimResult claim = claimer.claim(key_at("nowhere", 0s));
  EXPECT_EQ(claim.status, ClaimResult::Status::error);
  EXPECT_NE(claim.error.find("run `fleetcron migrate`"), std::string::npos) << claim.error;
}

TEST(PostgresErrors, AStoppedServerFailsClosedAndTheNextStatementReconnects) {
  PostgresServer server;
  const auto tables = unique_tables();
  auto connection = connect(server.uri());
  (void)postgres::migrate(*connection, tables);
  postgres::Claimer claimer(connection, {.tables = tables});
  ASSERT_EQ(claimer.claim(key_at("up", 0s)).status, ClaimResult::Status::claimed);
  server.stop();
  EXPECT_EQ(claimer.claim(key_at("down", 0s)).status, ClaimResult::Status::error);
  server.start();
  EXPECT_EQ(claimer.claim(key_at("back", 0s)).status, ClaimResult::Status::claimed);
}

}  // namespace
}  // namespace fleetcron::test
