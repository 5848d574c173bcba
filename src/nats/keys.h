// Internal: what NATS accepts as a KV key.
#pragma once

#include <string_view>

namespace fleetcron::nats::detail {

/// Non-empty, only [A-Za-z0-9_=/.-] and '\', no leading or trailing '.',
/// no "..". (nats.c 3.4's rule.)
bool valid_key(std::string_view key) noexcept;

}  // namespace fleetcron::nats::detail
