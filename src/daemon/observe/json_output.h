// The JSON the commands print (history, status; schemas in docs/daemon.md)
// and the HTTP API serves (docs/api.md):
// strings escaped as log lines are, instants as RFC 3339, absent as null.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "daemon/observe/fleet_view.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/time.h"

namespace fleetcron::daemon {

[[nodiscard]] std::string json_string(std::string_view text);
[[nodiscard]] std::string json_instant(const std::optional<Instant>& at);
[[nodiscard]] std::string json_number(const std::optional<int>& value);
/// A ledger record: the object `history --json` lists.
[[nodiscard]] std::string record_json(const FireRecord& record);
[[nodiscard]] std::string optional_record_json(const std::optional<FireRecord>& record);
/// A replica of the registry, a job of the fleet view, the leader (null if
/// none): the objects of `status --json` and the HTTP API.
[[nodiscard]] std::string replica_json(const ReplicaRecord& replica);
/// `extra_fields` (",\"name\":value…") go inside the job's object.
[[nodiscard]] std::string job_json(const JobView& job, std::string_view extra_fields = {});
[[nodiscard]] std::string leader_json(const LeaderView& leader);

}  // namespace fleetcron::daemon
