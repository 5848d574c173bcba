// `fleetcron migrate`: the only place fleetcron runs DDL.
#include <ostream>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"

namespace fleetcron::daemon {

int run_migrate_command(const Settings& settings, std::ostream& out, std::ostream& err) {
  try {
    return backend_for(settings.coordinator).migrate(settings, out, err);
  } catch (const std::exception& e) {
    err << "migrate: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
