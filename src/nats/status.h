// Internal: nats.c statuses to BackendErrors with readable messages.
#pragma once

#include <nats/nats.h>

#include <string>

#include "fleetcron/backend_error.h"

namespace fleetcron::nats::detail {

/// The kind of failure a status is (timeout, connect, io, auth, closed,
/// protocol for the rest).
BackendError::Kind kind_of(natsStatus status) noexcept;

/// "WHAT: TEXT (status N)", with nats.c's thread-local error text when it
/// belongs to `status` (read it before any other nats.c call).
std::string describe_status(natsStatus status, const std::string& what);

/// Throws the BackendError for `status` while doing `what`, its code the
/// status; adds nats.c's thread-local error text only when it belongs to
/// this status (it is stale otherwise).
[[noreturn]] void raise(natsStatus status, const std::string& what);

inline void check(natsStatus status, const std::string& where, const std::string& what) {
  if (status != NATS_OK) raise(status, where + ": " + what);
}

/// Nothing stored the request: no responders, or JetStream answered that
/// the stream does not exist (a bucket whose stream was deleted, or lost
/// with the server's store directory).
inline bool missing(const BackendError& error) noexcept { return error.code() == NATS_NO_RESPONDERS; }

/// Throws the BackendError missing() recognises: "WHAT" names the stream.
[[noreturn]] void raise_missing(const std::string& what);

/// A failed compare-and-swap ("wrong last sequence"), as opposed to a
/// failure of the store. nats.c reports both as NATS_ERR; the text tells.
bool is_wrong_last_sequence(natsStatus status);

/// nats.c's thread-local error text ("" if none).
std::string last_error_text();

}  // namespace fleetcron::nats::detail
