// `fleetcron migrate`: the only place fleetcron runs DDL.
#include <ostream>

#include "daemon/cli/commands.h"
#include "daemon/run/coordination_setup.h"
#include "fleetcron/postgres/schema.h"
#include "fleetcron/postgres/uri.h"

namespace fleetcron::daemon {

int run_migrate_command(const Settings& settings, std::ostream& out, std::ostream& err) {
  if (!postgres::is_postgres_uri(settings.coordinator)) {
    err << "migrate: only a PostgreSQL coordinator (postgres://…) has tables to create; memory, Redis and NATS need "
           "none\n";
    return 2;
  }
  try {
    const postgres::UriOptions options = postgres_options(settings);
    postgres::Connection connection(options.connection);
    out << "migrate: " << connection.describe() << '\n';
    for (const std::string& line : postgres::migrate(connection, options.tables)) out << "  " << line << '\n';
    return 0;
  } catch (const std::exception& e) {
    err << "migrate: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
