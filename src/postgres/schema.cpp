#include "fleetcron/postgres/schema.h"

#include <fmt/format.h>

#include <regex>
#include <stdexcept>

#include "postgres/pool.h"

namespace fleetcron::postgres {

namespace {

void check_name(std::string_view field, const std::string& name) {
  static const std::regex rule("^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?$");
  if (!std::regex_match(name, rule)) {
    throw std::invalid_argument(fmt::format(
        "postgres::TableNames.{}: \"{}\" is not a table name ([schema.]name of letters, digits and _)", field, name));
  }
  const auto dot = name.find('.');
  const std::string_view table =
      dot == std::string::npos ? std::string_view(name) : std::string_view(name).substr(dot + 1);
  if (table.size() > 63 || (dot != std::string::npos && dot > 63)) {
    throw std::invalid_argument(
        fmt::format("postgres::TableNames.{}: \"{}\" has a part longer than PostgreSQL's 63 bytes", field, name));
  }
}

// One object migrate() makes: how to tell whether it exists, and its DDL.
struct SchemaObject {
  std::string description;  // "table cron_claims"
  std::string exists_sql;   // one row with a boolean
  std::string create_sql;
  std::string missing_hint;  // for missing_schema()
  bool fleet_state = false;
};

std::string table_exists(const std::string& table) {
  return fmt::format("SELECT to_regclass('{}') IS NOT NULL", table);
}

std::string column_exists(const std::string& table, std::string_view column) {
  return fmt::format(
      "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('{}') AND attname = '{}' "
      "AND NOT attisdropped)",
      table, column);
}

// µs of server time, as fences and terms count (docs/fencing.md).
constexpr std::string_view now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

std::vector<SchemaObject> objects(const TableNames& t) {
  const std::string run = "run `fleetcron migrate`";
  std::vector<SchemaObject> out;
  // The reference's DDL, unchanged, so that its Migrate finds them as it made them.
  out.push_back({"table " + t.claims, table_exists(t.claims),
                 fmt::format("CREATE TABLE IF NOT EXISTS {} (fire_key text PRIMARY KEY, holder text NOT NULL, "
                             "claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)",
                             t.claims),
                 run});
  out.push_back({"table " + t.leader, table_exists(t.leader),
                 fmt::format("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, holder text NOT NULL, "
                             "expires_at timestamptz NOT NULL)",
                             t.leader),
                 run});
  out.push_back(
      {"table " + t.fence_table(), table_exists(t.fence_table()),
       fmt::format("CREATE TABLE IF NOT EXISTS {} (id integer PRIMARY KEY CHECK (id = 1), value bigint NOT NULL)",
                   t.fence_table()),
       run});
  out.push_back({"function " + t.fence_function() + "()",
                 fmt::format("SELECT to_regprocedure('{}()') IS NOT NULL", t.fence_function()),
                 // PL/pgSQL keeps its plan for the session (a SQL function is planned at every call).
                 fmt::format("CREATE OR REPLACE FUNCTION {0}() RETURNS bigint VOLATILE LANGUAGE plpgsql AS $$ "
                             "DECLARE granted bigint; BEGIN "
                             "INSERT INTO {1} AS f (id, value) VALUES (1, {2}) ON CONFLICT (id) DO UPDATE "
                             "SET value = greatest(f.value + 1, EXCLUDED.value) RETURNING value INTO granted; "
                             "RETURN granted; END $$ SECURITY DEFINER SET search_path FROM CURRENT",
                             t.fence_function(), t.fence_table(), now_us),
                 run});
  out.push_back({"column " + t.claims + ".fence", column_exists(t.claims, "fence"),
                 fmt::format("ALTER TABLE {} ADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT {}()", t.claims,
                             t.fence_function()),
                 "a table made by libtnb/cron's Migrate lacks it: " + run + " to add it (Go replicas keep working)"});
  out.push_back(
      {"column " + t.leader + ".term", column_exists(t.leader, "term"),
       fmt::format("ALTER TABLE {} ADD COLUMN IF NOT EXISTS term bigint NOT NULL DEFAULT {}", t.leader, now_us),
       "a table made by libtnb/cron's Migrate lacks it: " + run + " to add it (Go replicas keep working)"});
  out.push_back(
      {"table " + t.cursors(), table_exists(t.cursors()),
       fmt::format("CREATE TABLE IF NOT EXISTS {} (job_key bytea PRIMARY KEY, instant_us bigint NOT NULL, "
                   "schedule_digest numeric(20, 0) NOT NULL, version bigint NOT NULL, claimant text NOT NULL, "
                   "moved boolean NOT NULL, expires_at timestamptz NOT NULL)",
                   t.cursors()),
       run, true});
  out.push_back({"table " + t.ledger(), table_exists(t.ledger()),
                 fmt::format("CREATE TABLE IF NOT EXISTS {} (job_key bytea NOT NULL, fire_key bytea NOT NULL, "
                             "scheduled_us bigint NOT NULL, rank integer NOT NULL, "
                             "record bytea NOT NULL, PRIMARY KEY (job_key, fire_key))",
                             t.ledger()),
                 run, true});
  out.push_back(
      {"table " + t.ledgers(), table_exists(t.ledgers()),
       fmt::format("CREATE TABLE IF NOT EXISTS {} (job_key bytea PRIMARY KEY, expires_at timestamptz NOT NULL)",
                   t.ledgers()),
       run, true});
  out.push_back({"table " + t.documents(), table_exists(t.documents()),
                 fmt::format("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, body text NOT NULL, "
                             "revision bigint NOT NULL, expires_at timestamptz)",
                             t.documents()),
                 run, true});
  return out;
}

}  // namespace

void check_table_names(const TableNames& tables) {
  check_name("claims", tables.claims);
  check_name("leader", tables.leader);
  check_name("claims (its fence table)", tables.fence_table());
  check_name("claims (its fence function)", tables.fence_function());
  check_name("fleet_prefix", tables.documents());
  if (tables.claims == tables.leader) {
    throw std::invalid_argument(fmt::format("postgres::TableNames: claims and leader are both \"{}\"", tables.claims));
  }
}

std::vector<std::string> migrate(Connection& connection, const TableNames& tables) {
  check_table_names(tables);
  std::vector<std::string> done;
  connection.pool().transaction([&](detail::Session& session) {
    // One migration at a time: CREATE … IF NOT EXISTS races otherwise.
    (void)session.exec("SELECT pg_advisory_xact_lock(7308466417920233472)");
    bool new_claims = false, new_fences = false;
    for (const SchemaObject& object : objects(tables)) {
      const bool existed = session.exec(object.exists_sql).text(0, 0) == "t";
      const bool function = object.description.starts_with("function ");
      if (!existed || function) (void)session.exec(object.create_sql);  // functions: replaced, so they stay current
      if (!existed && object.description == "table " + tables.claims) new_claims = true;
      if (!existed && object.description == "table " + tables.fence_table()) new_fences = true;
      done.push_back(fmt::format("{} {}", existed ? (function ? "replaced" : "kept") : "created", object.description));
    }
    // The store-reset epoch: a store new from scratch (claims and fence
    // tables both created now) cannot have lost claims, so its epoch is the
    // Unix epoch; a claims table without the row — dropped and made again
    // beside a surviving fence counter, or made by the Go Migrate — may
    // have, so its epoch is now.
    const bool fresh = new_claims && new_fences;
    const std::string epoch = fresh ? "'1970-01-01T00:00:00Z'::timestamptz" : "now()";
    const detail::Rows wrote = session.exec(fmt::format(
        "INSERT INTO {} (fire_key, holder, claimed_at, expires_at) VALUES ('{}', 'fleetcron store-reset epoch', {}, "
        "'infinity') ON CONFLICT (fire_key) DO NOTHING RETURNING claimed_at",
        tables.claims, epoch_row, epoch));
    done.push_back(wrote.empty() ? fmt::format("kept the store-reset epoch row of {}", tables.claims)
                                 : fmt::format("wrote the store-reset epoch row of {} ({})", tables.claims,
                                               fresh ? "a new store: nothing lost before it" : "now"));
  });
  return done;
}

std::vector<std::string> missing_schema(Connection& connection, const TableNames& tables, bool with_fleet_state) {
  check_table_names(tables);
  std::vector<std::string> missing;
  for (const SchemaObject& object : objects(tables)) {
    if (object.fleet_state && !with_fleet_state) continue;
    if (connection.pool().exec(object.exists_sql).text(0, 0) != "t") {
      missing.push_back(fmt::format("{} is missing: {}", object.description, object.missing_hint));
    }
  }
  return missing;
}

}  // namespace fleetcron::postgres
