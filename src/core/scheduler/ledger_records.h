// Internal: which events become run-ledger records, and how.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fleetcron/events.h"
#include "fleetcron/fire_record.h"

namespace fleetcron::detail {

/// The ledger records an event stands for, written by replica
/// `replica_id` (a lost run's record names its runner, and `replica_id` as
/// the one that reported it): none for events that are no fire's fate to record — a
/// loser's already-claimed skip (the holder's record tells), later
/// attempts' starts, unclaimed cancels (another replica may run the fire),
/// manual rejects (the caller is told), and events of entries without a
/// key; one for any other fate. `coordinated`: the entry is claimed or
/// leader-gated, so a fire this replica's loop reached late may have run
/// elsewhere: its missed range is not the fleet's, and each of its newest
/// `keep_count` instants gets its own rank-0 missed record instead, which
/// any other replica's record of that fire replaces (ledger_rank()). Only
/// the fleet-wide catch-up writes a range record for such an entry.
[[nodiscard]] std::vector<FireRecord> ledger_records(const Event& event, const std::string& replica_id,
                                                     bool coordinated, std::size_t keep_count);

/// What an expired trigger's record and log line say.
[[nodiscard]] std::string trigger_expired_text(const TriggerExpiredEvent& e);

/// The fire key of a missed record: the first missed instant's fire key
/// and "#missed", so the run of that instant keeps its own entry.
[[nodiscard]] std::string missed_fire_key(const std::string& job_key, Instant first_missed);

/// The key of the `recovery`-th re-run of a lost run: the fire key and
/// "#recover<n>" (the fire key itself for 0). The re-run is claimed under
/// it and recorded under it, beside the lost record.
/// Inline: the daemon names a re-run's kept output by it, and the core
/// library's symbols are hidden in a shared build.
[[nodiscard]] inline std::string recovery_fire_key(const std::string& fire_key, int recovery) {
  return recovery > 0 ? fire_key + "#recover" + std::to_string(recovery) : fire_key;
}

}  // namespace fleetcron::detail
