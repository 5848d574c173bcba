// fleetcron::nats::FleetState — the fleet state on NATS JetStream KV
// (docs/fleet-state.md), in a bucket of its own, so the claims and leader
// buckets keep their meaning.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::nats {

inline constexpr std::string_view default_state_bucket = "FLEETCRON_STATE";

/// The configuration the state bucket is created with: a KV bucket has one
/// TTL for all its values, so every cursor lives max_cursor_keep_for (400
/// days) after its last write, whatever keep_for a call asks for.
[[nodiscard]] FLEETCRON_API BucketConfig state_bucket_config(std::string name = std::string(default_state_bucket));

/// Thread-safe. A job's cursor is the key "cursor." + encode_key(job key),
/// holding format_cursor_record()'s text. Each operation is a read and a
/// compare-and-swap on the key's revision, retried while other writers win
/// (at most 16 rounds): advance_cursor is a maximum, claim_catch_up a
/// compare-and-set on the record's content. A NATS failure is an error
/// result, never an exception; a bucket found missing is created again
/// once (its cursors are gone: nothing is caught up, as for a new job).
/// A job's ledger is the key "ledger." + encode_key(job key), holding its
/// records (format_fire_record()), newest first, one per line; a write is
/// a compare-and-swap of the whole value (one per job and call), and the
/// value keeps at most max_ledger_value_bytes (the oldest records beyond
/// it go, whatever the retention's keep_count). Like the cursors, a ledger
/// lives the bucket's TTL after its last write. The fleet-wide controls
/// are the key "controls" (format_job_controls()), written by compare-and-
/// swap on its revision: a pause lives the bucket's TTL after the last
/// change of any control. The replica registry is the key "replicas"
/// (format_replica_registry()), written the same way; its records expire
/// by their content.
class FLEETCRON_API FleetState final : public fleetcron::FleetState {
 public:
  /// Throws std::invalid_argument for a null bucket.
  explicit FleetState(std::shared_ptr<Bucket> bucket);
  ~FleetState() override;
  FleetState(const FleetState&) = delete;
  FleetState& operator=(const FleetState&) = delete;

  [[nodiscard]] CursorRead read_cursor(std::string_view job_key) override;
  /// Also rewrites an unchanged record when it is already past, so that
  /// it lives the bucket's TTL from this call.
  [[nodiscard]] CursorAdvance advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                             std::chrono::nanoseconds keep_for) override;
  [[nodiscard]] CatchUpClaim claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                            Instant instant, std::uint64_t schedule_digest,
                                            std::chrono::nanoseconds keep_for, std::string_view claimant) override;

  /// One compare-and-swap per job of `writes`.
  [[nodiscard]] std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override;
  [[nodiscard]] LedgerRead read_fires(std::string_view job_key, std::size_t limit) override;
  /// True unless the bucket has one replica (a cluster's stream may grant
  /// two compare-and-swaps on one revision, docs/nats.md) or it cannot be told.
  [[nodiscard]] bool may_lose_concurrent_updates() override;

  /// The server's timestamp of a write to the key "clock" (a put and a
  /// get: two round trips).
  [[nodiscard]] std::optional<Instant> store_now() override;
  [[nodiscard]] StoredDocument load_document(DocumentId which) override;
  /// `keep_for` does not apply: a document lives the bucket's TTL.
  [[nodiscard]] DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                                 std::chrono::nanoseconds keep_for) override;
  /// The key holding a document: "controls", "replicas" or "jobs".
  [[nodiscard]] static std::string document_key(DocumentId which);

  /// The key holding `job_key`'s ledger.
  [[nodiscard]] static std::string ledger_key(std::string_view job_key);
  /// The most a ledger value holds: well under the server's default
  /// max_payload (1 MiB).
  static constexpr std::size_t max_ledger_value_bytes = 512 * 1024;
  /// The key holding `job_key`'s cursor.
  [[nodiscard]] static std::string cursor_key(std::string_view job_key);
  /// Longest cursor key: the server drops connections whose protocol line
  /// is too long (as for claims).
  static constexpr std::size_t max_key_bytes = 2048;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::nats
