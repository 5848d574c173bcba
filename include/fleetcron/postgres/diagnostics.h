// fleetcron::postgres — the PostgreSQL store's diagnostics: a round trip,
// the claimer's clock offset, and the schema objects the tables lack
// (fleetcron never runs DDL outside migrate()).
#pragma once

#include <memory>

#include "fleetcron/api.h"
#include "fleetcron/diagnostics.h"
#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/connection.h"
#include "fleetcron/postgres/schema.h"

namespace fleetcron::postgres {

/// `claimer` may be null (leader mode): no clock offset then.
/// `with_fleet_state`: the fleet-state tables are part of the schema.
[[nodiscard]] FLEETCRON_API std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(
    std::shared_ptr<Connection> connection, TableNames tables, bool with_fleet_state,
    std::shared_ptr<Claimer> claimer = nullptr);

}  // namespace fleetcron::postgres
