// fleetcron::postgres — coordinator URIs for PostgreSQL: libpq's URI plus
// fleetcron's own parameters, which are taken out before libpq sees it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/postgres/connection.h"
#include "fleetcron/postgres/schema.h"
#include "fleetcron/uri_error.h"

namespace fleetcron::postgres {

/// What a PostgreSQL URI says: how to connect, and the tables to use.
struct FLEETCRON_API UriOptions {
  ConnectionOptions connection;
  TableNames tables;
  std::optional<std::string> leader_name;  ///< ?leader_name=
};

/// Parses postgres://… or postgresql://… (libpq's form: user, password,
/// host, port, dbname, and its parameters such as sslmode, sslrootcert,
/// passfile, connect_timeout) onto `base`. fleetcron's parameters:
/// claims_table, leader_table, fleet_prefix (TableNames), leader_name,
/// pool_size (1 .. 64), statement_timeout (a duration such as 5s; default
/// 5 s). Throws UriError naming the part, the password shown as "***".
[[nodiscard]] FLEETCRON_API UriOptions parse_uri(std::string_view uri, ConnectionOptions base = {});

/// True for the schemes this backend takes: postgres:// and postgresql://.
[[nodiscard]] FLEETCRON_API bool is_postgres_uri(std::string_view uri) noexcept;

}  // namespace fleetcron::postgres
