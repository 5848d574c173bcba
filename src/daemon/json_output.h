// The JSON the commands print (history, status; schemas in docs/daemon.md):
// strings escaped as log lines are, instants as RFC 3339, absent as null.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/fire_record.h"
#include "fleetcron/time.h"

namespace fleetcron::daemon {

[[nodiscard]] std::string json_string(std::string_view text);
[[nodiscard]] std::string json_instant(const std::optional<Instant>& at);
[[nodiscard]] std::string json_number(const std::optional<int>& value);
/// A ledger record: the object `history --json` lists.
[[nodiscard]] std::string record_json(const FireRecord& record);

}  // namespace fleetcron::daemon
