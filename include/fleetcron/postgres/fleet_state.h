// fleetcron::postgres::FleetState — the fleet state on PostgreSQL
// (docs/fleet-state.md, docs/postgres.md), in tables of its own beside the
// reference's cron_claims and cron_leader.
#pragma once

#include <memory>

#include "fleetcron/api.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/postgres/connection.h"
#include "fleetcron/postgres/schema.h"

namespace fleetcron::postgres {

struct FLEETCRON_API FleetStateOptions {
  /// Only fleet_prefix (the fleet-state tables) is used.
  TableNames tables;
};

/// Thread-safe; expiry is on the server's clock. A job's cursor is a row
/// of <fleet_prefix>cursors, moved by one upsert (a maximum) or by a
/// compare-and-set of the whole row (catch-up). A job's ledger is its rows
/// in <fleet_prefix>ledger (one per fire key, with its rank) and its expiry
/// in <fleet_prefix>ledgers; a record_fires() call is one transaction. The
/// controls, registry and catalogue are rows of <fleet_prefix>documents,
/// replaced by a compare-and-swap on their revision and text. A database
/// failure is an error result, never an exception.
class FLEETCRON_API FleetState final : public fleetcron::FleetState {
 public:
  /// Throws std::invalid_argument for a null connection or bad table names.
  explicit FleetState(std::shared_ptr<Connection> connection, FleetStateOptions options = {});
  ~FleetState() override;
  FleetState(const FleetState&) = delete;
  FleetState& operator=(const FleetState&) = delete;

  [[nodiscard]] CursorRead read_cursor(std::string_view job_key) override;
  /// One statement for all of them (job_key = ANY of an array).
  [[nodiscard]] std::vector<CursorRead> read_cursors(std::span<const std::string> job_keys) override;
  [[nodiscard]] CursorAdvance advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                             std::chrono::nanoseconds keep_for) override;
  [[nodiscard]] CatchUpClaim claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                            Instant instant, std::uint64_t schedule_digest,
                                            std::chrono::nanoseconds keep_for, std::string_view claimant) override;
  [[nodiscard]] std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override;
  [[nodiscard]] LedgerRead read_fires(std::string_view job_key, std::size_t limit) override;
  /// The server's clock_timestamp().
  [[nodiscard]] std::optional<Instant> store_now() override;
  [[nodiscard]] StoredDocument load_document(DocumentId which) override;
  [[nodiscard]] DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                                 std::chrono::nanoseconds keep_for) override;
  [[nodiscard]] const FleetStateOptions& options() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::postgres
