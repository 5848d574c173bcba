// For backend authors: the rules every FleetState implementation applies
// the same way — its arguments' checks (so bad arguments fail alike on
// every backend) and, for a store that keeps a job's ledger as one value,
// the ledger's rules. The conformance suite (tests/conformance/) holds an
// implementation to them.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// Throws std::invalid_argument if `job_key` is blank (only whitespace).
FLEETCRON_API void check_job_key(std::string_view job_key);

/// Throws std::invalid_argument naming the argument unless `job_key` is
/// not blank and `keep_for` is within 1 ms .. max_cursor_keep_for.
FLEETCRON_API void check_cursor_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for);

/// check_cursor_arguments(), and `instant` (to the microsecond) is later
/// than `seen`'s, and `claimant` is 1 to 64 characters without whitespace.
/// Every implementation checks its arguments with these, so bad arguments
/// fail the same way on every backend.
FLEETCRON_API void check_catch_up_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for,
                                            const std::optional<JobCursor>& seen, Instant instant,
                                            std::string_view claimant);

/// Throws std::invalid_argument naming the write unless every record and
/// retention passes check_fire_record() and check_ledger_retention().
FLEETCRON_API void check_ledger_writes(std::span<const LedgerWrite> writes);

/// Throws std::invalid_argument unless `job_key` is not blank and `limit`
/// is 1 to LedgerRetention::max_keep_count.
FLEETCRON_API void check_ledger_read(std::string_view job_key, std::size_t limit);

/// The ledger's rules for a store that keeps a job's ledger as one value
/// (memory, NATS): applies `writes` (all for the job of `ledger`) to
/// `ledger`, its records newest scheduled instant first (ties: greater
/// fire key first), as record_fires() describes — rank, then retention,
/// trimmed relative to the newest record or `store_now` (the store's
/// clock, where known) if that is earlier. Instants are kept to the
/// microsecond. One answer per write.
[[nodiscard]] FLEETCRON_API std::vector<LedgerWriteResult> apply_ledger_writes(
    std::vector<FireRecord>& ledger, std::span<const LedgerWrite> writes, std::optional<Instant> store_now = {});

}  // namespace fleetcron
