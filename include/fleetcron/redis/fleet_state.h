// fleetcron::redis::FleetState — the fleet state on Redis
// (docs/fleet-state.md), under its own prefix: libtnb/cron's keys
// (cron:claim:…, cron:leader) keep their meaning.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

inline constexpr std::string_view default_fleet_prefix = "cron:fleet:";

struct FLEETCRON_API FleetStateOptions {
  /// Every key of the fleet state starts with it; not empty. A job's
  /// cursor is fleet_prefix + "cursor:{" + job key + "}" (one hash tag per
  /// job), holding "<instant µs> <schedule digest> <version> <claimant or ->".
  /// Its ledger is a sorted set, fleet_prefix + "ledger:{" + job key + "}"
  /// (fire keys scored by their instant in µs), and a hash,
  /// fleet_prefix + "ledger-records:{" + job key + "}" (fire key -> record,
  /// format_fire_record()). The fleet-wide controls are one string,
  /// fleet_prefix + "controls" (format_job_controls()), without expiry: a
  /// pause lasts until it is resumed. The replica registry is one string,
  /// fleet_prefix + "replicas" (format_replica_registry()), expiring with
  /// its last live record.
  std::string fleet_prefix{default_fleet_prefix};
};

/// Thread-safe; each operation is one Lua script, so it is atomic on the
/// server. A Redis failure is an error result, never an exception.
class FLEETCRON_API FleetState final : public fleetcron::FleetState {
 public:
  /// Throws std::invalid_argument for a null client or an empty prefix.
  explicit FleetState(std::shared_ptr<Client> client, FleetStateOptions options = {});
  ~FleetState() override;
  FleetState(const FleetState&) = delete;
  FleetState& operator=(const FleetState&) = delete;

  [[nodiscard]] CursorRead read_cursor(std::string_view job_key) override;
  /// One pipelined round trip of GETs for all of them.
  [[nodiscard]] std::vector<CursorRead> read_cursors(std::span<const std::string> job_keys) override;
  [[nodiscard]] CursorAdvance advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                             std::chrono::nanoseconds keep_for) override;
  /// One pipelined round trip for all of them.
  [[nodiscard]] std::vector<CursorAdvance> advance_cursors(std::span<const CursorAdvanceRequest> requests) override;
  [[nodiscard]] CatchUpClaim claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                            Instant instant, std::uint64_t schedule_digest,
                                            std::chrono::nanoseconds keep_for, std::string_view claimant) override;

  /// One script call for all of them, each record written alone.
  [[nodiscard]] std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override;
  [[nodiscard]] LedgerRead read_fires(std::string_view job_key, std::size_t limit) override;

  /// The server's TIME.
  [[nodiscard]] std::optional<Instant> store_now() override;
  [[nodiscard]] StoredDocument load_document(DocumentId which) override;
  /// A script that compares the whole document before it writes.
  [[nodiscard]] DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                                 std::chrono::nanoseconds keep_for) override;

  /// How long a job's ledger keys live beyond `keep_for`, and how often
  /// this process sets their life again as it writes (not on every
  /// record): a quarter of `keep_for`, at most 1 h. The keys live at
  /// least `keep_for` after the last fire added, and at most this longer.
  [[nodiscard]] static std::chrono::nanoseconds ledger_life_refresh(std::chrono::nanoseconds keep_for);
  /// The jobs whose last life setting this process remembers; past it,
  /// it forgets them all (each job's life is then set once more).
  static constexpr std::size_t max_ledger_lives_kept = 200'000;

  [[nodiscard]] const FleetStateOptions& options() const noexcept;
  /// The key holding `job_key`'s cursor.
  [[nodiscard]] std::string cursor_key(std::string_view job_key) const;
  /// The sorted set indexing `job_key`'s ledger.
  [[nodiscard]] std::string ledger_key(std::string_view job_key) const;
  /// The key holding a document: fleet_prefix + "controls", "replicas" or "jobs".
  [[nodiscard]] std::string document_key(DocumentId which) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::redis
