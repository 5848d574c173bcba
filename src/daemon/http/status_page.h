// The status page at / (docs/daemon.md#status-page): one HTML document
// with its style and script inline — no external assets, so it works on a
// machine without internet. It reads /api/v1/fleet every 3 s and drives
// the controls through the API, asking for the token.
#pragma once

#include "daemon/http/http_server.h"

namespace fleetcron::daemon {

[[nodiscard]] HttpAnswer status_page();

}  // namespace fleetcron::daemon
