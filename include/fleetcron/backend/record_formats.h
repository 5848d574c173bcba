// For backend authors: the text records the stores keep (docs/fleet-state.md
// describes each). A backend that keeps the fleet state in a key-value
// store (Redis, NATS) writes and reads these; a user of the library never
// needs them, which is why they live here and not beside the types.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/job_catalogue.h"
#include "fleetcron/job_controls.h"
#include "fleetcron/replica_registry.h"

namespace fleetcron {

/// A record as Redis and NATS store it: its rank, a version, then the
/// fields, space-separated, text percent-encoded (docs/fleet-state.md).
[[nodiscard]] FLEETCRON_API std::string format_fire_record(const FireRecord& record);

/// The record in that text; nullopt if the text is not one.
[[nodiscard]] FLEETCRON_API std::optional<FireRecord> parse_fire_record(std::string_view text);

/// A cursor as Redis and NATS store it: "<instant µs> <schedule digest>
/// <version> <claimant or -> [<epoch>]", e.g. "1767322800000000 42 3 -"
/// (the epoch only where the store has one).
[[nodiscard]] FLEETCRON_API std::string format_cursor_record(const JobCursor& cursor);

/// The cursor in that text; nullopt if the text is not one.
[[nodiscard]] FLEETCRON_API std::optional<JobCursor> parse_cursor_record(std::string_view text);

/// The controls as the stores keep them: one line per job, in the order
/// given: "1 <job> <paused 0|1> <changed µs|-> <by|-> <n>", then for each
/// trigger " <id> <requested µs> <expires µs> <by>". Text fields are
/// percent-encoded as in fire records.
[[nodiscard]] FLEETCRON_API std::string format_job_controls(std::span<const JobControl> jobs);

/// The controls in that text; nullopt if it is not such a document.
[[nodiscard]] FLEETCRON_API std::optional<std::vector<JobControl>> parse_job_controls(std::string_view text);

/// The registry as the stores keep it: one line per replica, "1 <id> <host>
/// <pid> <version> <started µs> <beat µs> <expires µs> <accepted 0|1>
/// <jobs digest> <n>", per setting " <name> <value>", then " <m>" and per
/// run " <job> <fire key> <scheduled µs> <fence> <started µs> <recovery>
/// <manual 0|1>". Text fields
/// are percent-encoded as in fire records ("-" for empty).
[[nodiscard]] FLEETCRON_API std::string format_replica_registry(std::span<const ReplicaRecord> replicas);

/// The records in that text; nullopt if it is not such a document.
[[nodiscard]] FLEETCRON_API std::optional<std::vector<ReplicaRecord>> parse_replica_registry(std::string_view text);

/// The catalogue as the stores keep it: one line per job, "1 <job> <spec>
/// <zone> <seconds 0|1> <seen µs> <seen by>", text percent-encoded as in
/// fire records ("-" for empty); a job every replica runs
/// (every_replica) is "2 … <seen by> replica" instead. Fleet jobs keep the
/// version-1 line, which every earlier release reads; a version-2 line is
/// read by this release on (an earlier one rebuilds the catalogue without
/// it: upgrade every replica before using scope=replica). A removed job is
/// "3 <job> <spec> <zone> <seconds> <seen µs> <seen by> fleet|replica
/// <removed µs>", read by release 0.2 on (an earlier one rebuilds the
/// catalogue; its replicas mention their jobs again within the hour).
[[nodiscard]] FLEETCRON_API std::string format_job_catalogue(std::span<const CataloguedJob> jobs);

/// The jobs in that text; nullopt if it is not such a document.
[[nodiscard]] FLEETCRON_API std::optional<std::vector<CataloguedJob>> parse_job_catalogue(std::string_view text);

}  // namespace fleetcron
