// The NATS backend's own rules, open to its tests: the coordinator URI
// read into the settings, and the leader record as `status` prints it.
#pragma once

#include <optional>
#include <string>

#include "daemon/config/settings.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::daemon {

/// A NATS coordinator URI (nats::parse_uri) as connection options; its
/// query sets `settings`' buckets and key, Settings::coordinator_password
/// the password or token. Checks the leader key and TTL with the NATS
/// library's rules. Throws std::invalid_argument (UriError for the URI).
[[nodiscard]] nats::ConnectionOptions parse_nats_uri(const std::string& uri, Settings& settings);

/// The leader's record as `status` prints it: its holder and the revision
/// of its last renewal, or "none" (no record, deleted, or resigned).
[[nodiscard]] std::string describe_leader_record(const std::optional<nats::Entry>& entry);

}  // namespace fleetcron::daemon
