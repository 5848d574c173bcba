// Builds the coordination the daemon's settings ask for, on the backend
// the coordinator names (daemon/backends), wrapped so every claim and
// election is timed and its failures counted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/backends/backend.h"
#include "daemon/config/settings.h"
#include "daemon/observe/metrics.h"

namespace fleetcron::daemon {

/// The settings two replicas of one fleet must share (Backend::dedup_settings()).
[[nodiscard]] std::vector<ReplicaSetting> dedup_settings(const Settings& settings);

/// The claimer the settings ask for, without connecting (claims fail):
/// its dedup window and key rules are the real one's. nullptr in leader
/// mode. For `fleetcron validate`. Throws std::invalid_argument.
[[nodiscard]] std::shared_ptr<Claimer> make_offline_claimer(const Settings& settings);

/// Backend::connect(), the claimer and elector measured into `metrics`,
/// the replica settings filled in. `holder` names this replica as a leader
/// candidate (the replica id; empty: each elector's own random one).
/// Throws std::invalid_argument for bad URIs or options.
[[nodiscard]] Coordination make_coordination(const Settings& settings, Metrics& metrics,
                                             const std::string& holder = {});

}  // namespace fleetcron::daemon
