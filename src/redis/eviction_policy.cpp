#include "fleetcron/redis/eviction_policy.h"

#include <fmt/format.h>

#include "redis/commands.h"

namespace fleetcron::redis {

std::string EvictionPolicy::describe() const {
  if (safe()) return "maxmemory-policy noeviction: claims and the lease are never evicted";
  if (policy.empty()) {
    return fmt::format("cannot read maxmemory-policy ({}); unless it is noeviction, Redis may evict claims (fires run "
                       "twice) and the leader lease (two leaders)",
                       error);
  }
  return fmt::format("maxmemory-policy {} lets Redis evict claims (fires run twice) and the leader lease (two leaders) "
                     "under memory pressure; set it to noeviction (CONFIG SET maxmemory-policy noeviction, and in "
                     "redis.conf), and size maxmemory for the claims (docs/redis.md)",
                     policy);
}

EvictionPolicy read_eviction_policy(Client& client) {
  EvictionPolicy out;
  try {
    const Reply reply = client.impl().command({"CONFIG", "GET", "maxmemory-policy"});
    out.answered = true;
    if (reply.is_error()) {
      out.error = "CONFIG GET refused: " + reply.text;
    } else if (reply.type == Reply::Type::array && reply.elements.size() == 2 &&
               reply.elements[1].type == Reply::Type::string) {
      out.policy = reply.elements[1].text;
    } else {
      out.error = fmt::format("CONFIG GET answered a {} of {} elements", to_string(reply.type), reply.elements.size());
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace fleetcron::redis
