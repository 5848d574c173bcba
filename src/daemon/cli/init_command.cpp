// `fleetcron init`: declares a coordination store new, so that a fleet's
// first start on it loses nothing (docs/redis.md and docs/nats.md, "A new
// store"); on PostgreSQL, `fleetcron migrate` does it.
#include <ostream>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"

namespace fleetcron::daemon {

int run_init_command(const Settings& settings, std::ostream& out, std::ostream& err) {
  try {
    return backend_for(settings.coordinator).init(settings, out, err);
  } catch (const std::exception& e) {
    err << "init: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
