// fleetcron::nats — the coordination contract on NATS JetStream KV: the
// Elector (nats/elector.h) and the Claimer (nats/claimer.h).
#pragma once

#include "fleetcron/nats/claimer.h"
#include "fleetcron/nats/elector.h"
