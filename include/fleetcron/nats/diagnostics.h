// fleetcron::nats — the NATS store's diagnostics: a round trip to the
// server (connecting if need be) and the claimer's clock offset.
#pragma once

#include <memory>

#include "fleetcron/api.h"
#include "fleetcron/diagnostics.h"
#include "fleetcron/nats/claimer.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::nats {

/// `claimer` may be null (leader mode): no clock offset then.
[[nodiscard]] FLEETCRON_API std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(
    std::shared_ptr<Connection> connection, std::shared_ptr<Claimer> claimer = nullptr);

}  // namespace fleetcron::nats
