// fleetcron::redis — reading the coordination's keys without taking part,
// for status commands and dashboards: who holds the lease, which fires
// are claimed. Nothing here writes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// The leadership lease as the store holds it.
struct FLEETCRON_API LeaseRecord {
  /// The holder's identity; nullopt when nobody holds the lease.
  std::optional<std::string> holder;
  /// The term counter's value as stored (absent before the first term, or
  /// where only Go replicas lead: they count no terms).
  std::optional<std::string> term;
  /// Until the lease expires; meaningful only with a holder.
  std::chrono::milliseconds expires_in{0};
};

/// Reads leader_key, its PTTL and term_key (empty: leader_key + ":term").
/// Throws BackendError: AuthError for NOAUTH/NOPERM/WRONGPASS replies,
/// ProtocolError for other error replies.
[[nodiscard]] FLEETCRON_API LeaseRecord read_lease(Client& client, std::string_view leader_key, std::string_view term_key = {});

/// Calls visit(fire_key) for the claims under claim_prefix (taken
/// literally, glob characters included; the prefix stripped; keys without
/// '@' are skipped), scanning at most `limit` keys with SCAN so the server
/// is never blocked. Returns the keys scanned. Throws BackendError as
/// read_lease() does, also when SCAN is refused (an ACL without it).
FLEETCRON_API std::size_t scan_claims(Client& client, std::string_view claim_prefix,
                        const std::function<void(std::string_view fire_key)>& visit, std::size_t limit = 1'000'000);

}  // namespace fleetcron::redis
