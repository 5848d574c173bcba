// fleetcron — the fleet state kept in memory: the embedded default for one
// process, and the model the Redis and NATS implementations are tested
// against (tests/conformance/).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/fleet_state.h"

namespace fleetcron {

/// Cursors and ledgers in maps, each expiring `keep_for` after its last
/// write (on the clock's steady timeline). Bounded: at most `max_cursors`
/// live cursors and as many live ledgers (default 100,000 each); past
/// that, writes of new jobs fail with an error naming the limit. Share one instance between schedulers to make them
/// one fleet.
class FLEETCRON_API MemoryFleetState final : public FleetState {
 public:
  static constexpr std::size_t default_max_cursors = 100'000;
  explicit MemoryFleetState(std::shared_ptr<Clock> clock, std::size_t max_cursors = default_max_cursors);
  ~MemoryFleetState() override;
  MemoryFleetState(const MemoryFleetState&) = delete;
  MemoryFleetState& operator=(const MemoryFleetState&) = delete;

  [[nodiscard]] CursorRead read_cursor(std::string_view job_key) override;
  [[nodiscard]] CursorAdvance advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                             std::chrono::nanoseconds keep_for) override;
  [[nodiscard]] CatchUpClaim claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                            Instant instant, std::uint64_t schedule_digest,
                                            std::chrono::nanoseconds keep_for, std::string_view claimant) override;

  [[nodiscard]] std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override;
  [[nodiscard]] LedgerRead read_fires(std::string_view job_key, std::size_t limit) override;

  /// The clock's wall time: the store's clock of a fleet in one process.
  [[nodiscard]] std::optional<Instant> store_now() override;

  /// A document expires `keep_for` after its replacement on the clock's
  /// steady time (never for 0).
  [[nodiscard]] StoredDocument load_document(DocumentId which) override;
  [[nodiscard]] DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                                 std::chrono::nanoseconds keep_for) override;

  /// Live (unexpired) ledgers right now.
  [[nodiscard]] std::size_t ledgers() const;
  /// Live (unexpired) cursors right now.
  [[nodiscard]] std::size_t size() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fleetcron
