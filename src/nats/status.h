// Internal: nats.c statuses to exceptions with readable messages.
#pragma once

#include <nats/nats.h>

#include <string>

#include "fleetcron/nats/connection.h"

namespace fleetcron::nats::detail {

/// An Error for `status` while doing `what`; adds nats.c's thread-local
/// error text only when it belongs to this status (it is stale otherwise).
Error error(natsStatus status, const std::string& what);

inline void check(natsStatus status, const std::string& where, const std::string& what) {
  if (status != NATS_OK) throw error(status, where + ": " + what);
}

/// A failed compare-and-swap ("wrong last sequence"), as opposed to a
/// failure of the store. nats.c reports both as NATS_ERR; the text tells.
bool is_wrong_last_sequence(natsStatus status);

/// nats.c's thread-local error text ("" if none).
std::string last_error_text();

}  // namespace fleetcron::nats::detail
