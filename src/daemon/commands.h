// The program's subcommands other than `next`: validate and status.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "daemon/settings.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::daemon {

/// `fleetcron validate FILE`: parses the file and prints each job's key,
/// line, spec, command and next `count` fires. Exit 0, or 2 with the error.
int run_validate_command(const Settings& settings, int count, std::ostream& out, std::ostream& err);

/// `fleetcron status --coordinator URI`: the leader's identity and term;
/// for Redis also the claims of the last hour per job. Runs nothing.
int run_status_command(const Settings& settings, std::ostream& out, std::ostream& err);

/// The status line for a NATS leader record, one line whatever the record
/// holds (its value is escaped).
[[nodiscard]] std::string describe_leader_record(const std::optional<nats::Entry>& entry);

}  // namespace fleetcron::daemon
