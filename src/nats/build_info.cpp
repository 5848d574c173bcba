#include "fleetcron/nats/build_info.h"

#include <fmt/format.h>
#include <nats/nats.h>

namespace fleetcron::nats {

std::string build_info() { return fmt::format("nats (nats.c {}; JetStream key-value buckets)", nats_GetVersion()); }

}  // namespace fleetcron::nats
