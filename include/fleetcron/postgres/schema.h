// fleetcron::postgres — the tables: libtnb/cron's postgrescoord tables
// (cron_claims, cron_leader, with their names configurable as there) plus
// fleetcron's additions, which have defaults so that Go replicas keep
// working against them; `fleetcron migrate` creates them, nothing else
// runs DDL (docs/postgres.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/postgres/connection.h"

namespace fleetcron::postgres {

inline constexpr std::string_view default_claims_table = "cron_claims";
inline constexpr std::string_view default_leader_table = "cron_leader";
inline constexpr std::string_view default_fleet_prefix = "fleetcron_";

/// The tables' names, each an unquoted identifier, optionally schema-
/// qualified: ^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$ (the
/// reference's rule), each part at most 63 bytes (PostgreSQL would cut a
/// longer one silently). PostgreSQL folds them to lower case, as it does
/// for the reference's statements.
struct FLEETCRON_API TableNames {
  /// libtnb/cron's claims table.
  std::string claims{default_claims_table};
  /// libtnb/cron's leader table.
  std::string leader{default_leader_table};
  /// The fleet state's tables are fleet_prefix + "cursors", "ledger",
  /// "ledgers" and "documents"; it may carry a schema ("ops.fleetcron_").
  std::string fleet_prefix{default_fleet_prefix};

  /// The fence counter beside the claims table: claims + "_fence".
  [[nodiscard]] std::string fence_table() const { return claims + "_fence"; }
  /// The function giving each claim row its fence: claims + "_next_fence".
  [[nodiscard]] std::string fence_function() const { return claims + "_next_fence"; }
  [[nodiscard]] std::string cursors() const { return fleet_prefix + "cursors"; }
  [[nodiscard]] std::string ledger() const { return fleet_prefix + "ledger"; }
  [[nodiscard]] std::string ledgers() const { return fleet_prefix + "ledgers"; }
  [[nodiscard]] std::string documents() const { return fleet_prefix + "documents"; }
};

/// Throws std::invalid_argument naming the field and value unless every
/// name, derived ones included, follows the rule above.
FLEETCRON_API void check_table_names(const TableNames& tables);

/// The claims row that holds the store's reset epoch (docs/postgres.md);
/// it never expires, and no fire key can equal it (fire keys hold '@').
inline constexpr std::string_view epoch_row = "fleetcron:epoch";

/// Creates what is missing, in one transaction (serialised against other
/// migrations by an advisory lock): the reference's two tables exactly as
/// its Migrate makes them, fleetcron's columns (cron_claims.fence,
/// cron_leader.term), the fence counter and function, and the fleet-state
/// tables. Idempotent; returns one line per object saying what it did
/// ("created table cron_claims", "kept table cron_leader", …). Throws
/// BackendError.
[[nodiscard]] FLEETCRON_API std::vector<std::string> migrate(Connection& connection, const TableNames& tables);

/// What the schema lacks, one line per missing object, each saying how to
/// fix it; empty when fleetcron can run on it. `with_fleet_state`: the
/// fleet-state tables are needed too. Throws BackendError.
[[nodiscard]] FLEETCRON_API std::vector<std::string> missing_schema(Connection& connection, const TableNames& tables,
                                                                    bool with_fleet_state = true);

}  // namespace fleetcron::postgres
