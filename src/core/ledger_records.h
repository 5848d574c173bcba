// Internal: which events become run-ledger records, and how.
#pragma once

#include <optional>
#include <string>

#include "fleetcron/events.h"
#include "fleetcron/fire_record.h"

namespace fleetcron::detail {

/// The ledger record an event stands for, written by replica `replica_id`;
/// nullopt for events that are no fire's fate to record: a follower's
/// not-leader and a loser's already-claimed skips (another replica's
/// record tells), later attempts' starts, unclaimed cancels (another
/// replica may run the fire), manual rejects (the caller is told), and
/// events of entries without a key. `coordinated`: the entry is claimed or
/// leader-gated, so a missed fire this replica saw late may have been run
/// by another and only the fleet-wide catch-up's count is recorded.
[[nodiscard]] std::optional<FireRecord> ledger_record(const Event& event, const std::string& replica_id,
                                                      bool coordinated);

/// The fire key of a missed record: the first missed instant's fire key
/// and "#missed", so the run of that instant keeps its own entry.
[[nodiscard]] std::string missed_fire_key(const std::string& job_key, Instant first_missed);

}  // namespace fleetcron::detail
