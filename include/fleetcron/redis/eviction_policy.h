// fleetcron::redis — is the server allowed to evict keys? A Redis with a
// maxmemory-policy other than noeviction drops keys under memory pressure:
// claims (a fire runs twice) and the leader lease (two leaders).
#pragma once

#include <string>

#include "fleetcron/api.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// What CONFIG GET maxmemory-policy answered.
struct FLEETCRON_API EvictionPolicy {
  /// The policy ("noeviction", "allkeys-lru", …); empty if it could not be
  /// read (then `error` says why: CONFIG disabled or renamed, as managed
  /// services often do; the server unreachable).
  std::string policy;
  std::string error;
  /// The server answered (with the policy or with an error reply).
  bool answered = false;
  /// Known to be noeviction: claims and the lease are never evicted.
  [[nodiscard]] bool safe() const noexcept { return policy == "noeviction"; }
  /// A line for logs: the policy and what to do about it.
  [[nodiscard]] std::string describe() const;
};

/// One round trip; never throws.
[[nodiscard]] FLEETCRON_API EvictionPolicy read_eviction_policy(Client& client);

}  // namespace fleetcron::redis
