// The coordination store's own view of the fleet, outside the fleet state:
// the leader as the store holds it and, on Redis, the recent claims. For
// `fleetcron status` and the HTTP API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/config/settings.h"

namespace fleetcron::daemon {

/// The leader as the store holds it.
struct LeaderView {
  std::optional<std::string> holder;
  std::optional<std::string> term;                // Redis
  std::optional<std::int64_t> expires_in_ms;      // Redis
  std::optional<std::uint64_t> renewed_revision;  // NATS
};

struct StoreView {
  std::string coordinator;
  LeaderView leader;
  std::string text;  // the store-specific lines (leader, Redis claims), escaped
};

/// Connects to the coordinator (Backend::read_view()) and reads the
/// leader, and with `with_claims` the claims of the last hour where the
/// store can list them (a SCAN: Redis only). Throws std::runtime_error
/// (escaped) or BackendError.
[[nodiscard]] StoreView read_store_view(const Settings& settings, bool with_claims);

}  // namespace fleetcron::daemon
