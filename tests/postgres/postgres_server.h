// Test support: PostgreSQL clusters of the tests' own
// (scripts/postgres_cluster.sh: initdb and pg_ctl from Debian's
// postgresql-15, as the postgres user when root), on free loopback ports,
// stopped by PID. A cluster that cannot start throws: the test fails.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "fleetcron/postgres/schema.h"

namespace fleetcron::test {

class PostgresServer {
 public:
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  /// Starts again on the same port and data (after stop()); throws if it cannot.
  void start();
  /// Fast shutdown, by PID; waits for it.
  void stop();
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// postgres://fleetcron:…@127.0.0.1:PORT/postgres
  [[nodiscard]] std::string uri() const;

 private:
  std::string dir_;
  std::uint16_t port_ = 0;
};

/// The URI of the cluster shared by the tests of this process: the one in
/// $FLEETCRON_TEST_POSTGRES_URL (started by scripts/test.sh), else one
/// started on first use and stopped at exit.
std::string shared_postgres_uri();

/// Table names unique to this test and run (tables "t<n>_<run>_…"), so
/// tests sharing a cluster never see each other's rows; not migrated.
postgres::TableNames unique_tables();

/// psql's answer to `sql` on `uri` (rows on lines, columns joined by '|');
/// throws if psql fails.
std::string psql(const std::string& uri, const std::string& sql);

}  // namespace fleetcron::test
