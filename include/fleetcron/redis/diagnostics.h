// fleetcron::redis — the Redis store's diagnostics: PING, the claimer's
// clock offset, and the maxmemory-policy as the configuration that matters
// (a policy other than noeviction drops claims and the lease).
#pragma once

#include <memory>

#include "fleetcron/api.h"
#include "fleetcron/diagnostics.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// `claimer` may be null (leader mode): no clock offset then.
[[nodiscard]] FLEETCRON_API std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(
    std::shared_ptr<Client> client, std::shared_ptr<Claimer> claimer = nullptr);

}  // namespace fleetcron::redis
