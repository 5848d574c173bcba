// fleetcron::redis — what this backend was built with, for `fleetcron --version`.
#pragma once

#include <string>

#include "fleetcron/api.h"

namespace fleetcron::redis {

/// The backend and the versions of the libraries under it, one line.
[[nodiscard]] FLEETCRON_API std::string build_info();

}  // namespace fleetcron::redis
