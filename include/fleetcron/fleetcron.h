// fleetcron — everything public, in one include.
#pragma once

#include "fleetcron/backend_error.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"
#include "fleetcron/events.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/memory_coordination.h"
#include "fleetcron/memory_fleet_state.h"
#include "fleetcron/parse_error.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/schedule.h"
#include "fleetcron/scheduler.h"
#include "fleetcron/time.h"
#include "fleetcron/time_zone.h"
#include "fleetcron/version.h"
