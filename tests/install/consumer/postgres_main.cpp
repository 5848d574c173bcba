// Uses fleetcron::postgres through the installed headers and library,
// without a server: a URI's description (no password) and its tables.
#include <fleetcron/postgres/uri.h>

#include <iostream>

int main() {
  const auto options = fleetcron::postgres::parse_uri("postgres://cron:secret@127.0.0.1:5433/ops?claims_table=jobs.claims");
  std::cout << fleetcron::postgres::describe(options.connection) << ' ' << options.tables.claims << ' '
            << options.tables.fence_table() << '\n';
  return 0;
}
