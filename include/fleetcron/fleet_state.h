// fleetcron — the fleet state: what the fleet remembers across replicas
// and restarts, kept in the coordination store (docs/fleet-state.md):
// each job's cursor (the newest instant the fleet has handled, and the
// compare-and-set through which missed instants are caught up exactly
// once), each job's ledger (what became of its recent fires), the
// fleet-wide controls and the replica registry.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/backend/fleet_documents.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/job_catalogue.h"
#include "fleetcron/job_controls.h"
#include "fleetcron/replica_registry.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// Cursors keep instants to the microsecond (rounded down), as the stores
/// do; `keep_for` is at most this.
inline constexpr std::chrono::nanoseconds max_cursor_keep_for = std::chrono::hours{24 * 400};

/// A job's cursor as the store holds it. claim_catch_up() compares all of
/// it, so a cursor that expired and was written again with the same
/// content stands for the same state of the job, whatever happened between.
struct FLEETCRON_API JobCursor {
  /// The newest instant of the job the fleet has handled (claimed,
  /// decided, or dropped before the claim).
  Instant instant{};
  /// Identifies the schedule the cursor was written for: a cursor written
  /// for another schedule does not catch up (the caller compares it).
  std::uint64_t schedule_digest = 0;
  /// Counts the record's writes (1 for a new one).
  std::uint64_t version = 0;
  /// The claimant of the claim_catch_up() that wrote it; empty when an
  /// advance did. A caller whose claim_catch_up() failed with an error
  /// (the store may have applied it) recognises its own win by it.
  std::string claimant;
  /// The store's epoch when it was written: an identity the store changes
  /// whenever it may have lost or gone back on writes (Redis: its
  /// replication ID, new on every restart and failover). Empty where the
  /// store has none to tell (memory, NATS: there a lost bucket takes its
  /// cursors with it). A cursor from an earlier epoch may point before
  /// fires that ran, so it catches nothing up (CatchUpClaim::epoch_changed).
  std::string epoch;

  friend bool operator==(const JobCursor&, const JobCursor&) = default;
};

/// The answer to FleetState::read_cursor().
struct FLEETCRON_API CursorRead {
  enum class Status {
    found,   ///< `cursor` holds it
    absent,  ///< no cursor: a job new to the store (or expired, or lost)
    error,   ///< the store failed; `error` says how (callers fail closed)
  };
  Status status = Status::error;
  std::optional<JobCursor> cursor;
  std::string error;
};

/// The answer to FleetState::advance_cursor().
struct FLEETCRON_API CursorAdvance {
  enum class Status {
    moved,         ///< the cursor moved to the instant given
    already_past,  ///< it was there or past it already (only its expiry was refreshed)
    error,         ///< the store failed; the cursor may or may not have moved
  };
  Status status = Status::error;
  /// The cursor after the call (not for error).
  std::optional<JobCursor> current;
  std::string error;
};

/// The answer to FleetState::claim_catch_up().
struct FLEETCRON_API CatchUpClaim {
  enum class Status {
    claimed,     ///< this caller's compare-and-set won: it handles the range
    superseded,  ///< the cursor moved since it was read; `current` is its value
    /// The cursor was still as read, but written in an earlier store epoch
    /// (JobCursor::epoch: the store restarted, failed over or was restored
    /// since), so it may point before fires that ran: the caller must not
    /// run the range. The cursor now holds `instant` in the current epoch
    /// (`current`); this caller reports the range (rule 4).
    epoch_changed,
    error,       ///< the store failed: the caller must not run the range (fail closed); the
                 ///< store may still have applied it: read the cursor, and if it holds this
                 ///< caller's claimant and instant, the win is the caller's
  };
  Status status = Status::error;
  /// The cursor after the call: the new one when claimed, the one found
  /// when superseded (nullopt if there is none).
  std::optional<JobCursor> current;
  std::string error;
};

/// One advance of FleetState::advance_cursors(): advance_cursor()'s arguments.
struct FLEETCRON_API CursorAdvanceRequest {
  std::string_view job_key;
  Instant instant{};
  std::uint64_t schedule_digest = 0;
  std::chrono::nanoseconds keep_for{0};
};

/// One write of FleetState::record_fires(): a record and the bounds of
/// its job's ledger.
struct FLEETCRON_API LedgerWrite {
  FireRecord record;
  LedgerRetention retention;
};

/// The answer to one LedgerWrite.
struct FLEETCRON_API LedgerWriteResult {
  enum class Status {
    written,    ///< the record is the fire's entry now
    outranked,  ///< the fire's entry already held a record of this rank or higher (ledger_rank); kept
    error,      ///< the store failed; the record may or may not be kept
    /// written, and let go at once by the ledger's bounds (its retention,
    /// or the store's size cap: NATS's 512 KiB value), being older than
    /// every record kept. Memory and NATS tell; Redis and PostgreSQL answer
    /// `written` (only a store whose writes are read back needs to tell).
    let_go,
  };
  Status status = Status::error;
  std::string error;
};

/// The answer to FleetState::read_fires().
struct FLEETCRON_API LedgerRead {
  enum class Status {
    found,  ///< `records` holds the ledger's newest (none when the job has no ledger)
    error,  ///< the store failed, or holds something that is not a record; `error` says which
  };
  Status status = Status::error;
  std::vector<FireRecord> records;  ///< newest scheduled instant first
  std::string error;
};

/// Where a fleet keeps its state. Implementations: MemoryFleetState (one
/// process), redis::, nats:: and postgres::FleetState (docs/fleet-state.md).
/// A backend implements the cursor and ledger operations below and the two
/// document primitives of FleetDocuments (backend/fleet_documents.h);
/// the controls, registry and catalogue are written once, over those. Every
/// call is thread-safe, bounded in time, and answers with a result, never
/// an exception for a store failure.
class FLEETCRON_API FleetState : public FleetDocuments {
 public:
  ~FleetState() override = default;

  /// The job's cursor.
  [[nodiscard]] virtual CursorRead read_cursor(std::string_view job_key) = 0;

  /// read_cursor() for each job: one answer per key, in order. The
  /// scheduler calls it for the catch-ups due together (a start queues
  /// every job's), so a networked store can read them in one round trip
  /// (Redis pipelines them). The default calls read_cursor() for each.
  [[nodiscard]] virtual std::vector<CursorRead> read_cursors(std::span<const std::string> job_keys);

  /// Moves the job's cursor to `instant` unless it is already there or
  /// past it (a maximum: replicas racing to advance never move it back).
  /// The record then lives at least `keep_for` after this call (a backend
  /// whose expiry is per store, as NATS's per bucket, may keep it longer);
  /// `schedule_digest` replaces the stored one when the cursor moves.
  [[nodiscard]] virtual CursorAdvance advance_cursor(std::string_view job_key, Instant instant,
                                                     std::uint64_t schedule_digest,
                                                     std::chrono::nanoseconds keep_for) = 0;

  /// advance_cursor() for each request: one answer per request, in order.
  /// The scheduler calls it for the fires of one claim batch, so a
  /// networked store can advance them in one round trip (Redis pipelines
  /// them). The default calls advance_cursor() for each.
  [[nodiscard]] virtual std::vector<CursorAdvance> advance_cursors(std::span<const CursorAdvanceRequest> requests);

  /// The compare-and-set of catch-up: sets the cursor to `instant` only if
  /// it is still exactly `seen` (every field), or still absent when `seen`
  /// is nullopt. Of several callers with the same `seen`, exactly one is
  /// answered `claimed`; it alone may run the missed instants in
  /// (seen, instant]. `instant` must be later than `seen`'s; `claimant`
  /// (1 to 64 characters, no space) names the caller in the new record.
  [[nodiscard]] virtual CatchUpClaim claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                                    Instant instant, std::uint64_t schedule_digest,
                                                    std::chrono::nanoseconds keep_for, std::string_view claimant) = 0;

  /// Writes each record into its job's ledger, under its fire key, unless
  /// the entry there ranks as high or higher (ledger_rank()), and applies
  /// the write's retention to that ledger: the newest `keep_count` records
  /// stay, a record scheduled more than `keep_for` before the ledger's
  /// newest goes (or before the store's clock, if that is earlier: a
  /// record dated ahead by a replica's clock deletes nothing), and the
  /// whole ledger expires `keep_for` after its last write. A store may
  /// bound the work of one call (Redis: 1,000 records trimmed beyond 8 per
  /// record): a retention lowered on many jobs at once then takes effect
  /// over their next writes.
  /// One answer per write, in order; a networked store sends them in one
  /// round trip. Throws std::invalid_argument (check_fire_record(),
  /// check_ledger_retention()) before it writes anything.
  [[nodiscard]] virtual std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) = 0;

  /// The job's newest `limit` records (1 to LedgerRetention::max_keep_count),
  /// newest scheduled instant first.
  [[nodiscard]] virtual LedgerRead read_fires(std::string_view job_key, std::size_t limit) = 0;

  /// Whether a write this store acknowledged may still be undone by another
  /// replica's concurrent compare-and-swap (nats-server 2.9's clustered
  /// streams grant two updates of one key on the same revision,
  /// docs/nats.md). The scheduler's ledger writer then reads its records
  /// back a moment later and writes again those it finds missing. The
  /// default: false.
  [[nodiscard]] virtual bool may_lose_concurrent_updates() { return false; }

  /// The store's own clock, read now (Redis: TIME; PostgreSQL:
  /// clock_timestamp(); NATS: the server's timestamp of a probe write;
  /// memory: its clock). Callers read it through a StoreClock
  /// (store_clock.h), which measures the offset and keeps it. nullopt when
  /// the store cannot tell it (the default) or could not be reached.
  [[nodiscard]] virtual std::optional<Instant> store_now();

  // ---- fleet-wide controls (job_controls.h) --------------------------
  // One document holds them all; each change is a compare-and-swap of it
  // through the document primitives (backend/fleet_documents.h), so every
  // backend shares these rules.
  // `now` is the store's clock as the caller knows it (StoreClock::now():
  // never one replica's own clock, docs/fleet-state.md "One clock"):
  // triggers that expired by then are left out (and dropped at the next
  // change). `by` names the caller (1 to 64 characters, no whitespace).

  /// Every job held paused or with triggers waiting.
  [[nodiscard]] ControlsRead read_controls(Instant now);
  /// Pauses or resumes the job for the whole fleet; `unchanged` if it
  /// already was. A pause stays until resumed, whatever restarts.
  [[nodiscard]] ControlChange set_paused(std::string_view job_key, bool paused, std::string_view by, Instant now);
  /// Asks the fleet to run the job once; the answer names the trigger. It
  /// waits at most `wait` (0 to max_trigger_wait) for a replica to take it.
  /// With a `request_id` (check_trigger_request_id()), the trigger's id is
  /// derived from it (trigger_id_of()), so a request sent again (a retry
  /// after a lost answer) is answered `unchanged` with the same id while
  /// the trigger waits or its tombstone stays (trigger_tombstone_keep);
  /// without one, every call is a new trigger.
  [[nodiscard]] ControlChange request_trigger(std::string_view job_key, std::string_view by, Instant now,
                                              std::chrono::nanoseconds wait = default_trigger_wait,
                                              std::string_view request_id = {});
  /// Drops the triggers that expired by `now` untaken: each is answered
  /// (ControlsRead::expired) to exactly one caller, the one whose write
  /// dropped it, which reports it (the scheduler: a log line and a ledger
  /// record, fate skipped, reason trigger-expired).
  [[nodiscard]] ControlsRead drop_expired_triggers(Instant now);
  /// Takes the trigger from the store: of all callers, exactly one is
  /// answered `changed` and runs it; the others `absent`. The trigger
  /// stays as a tombstone naming `by` (the taker, as check_control_author()
  /// wants it; empty: "unnamed") for trigger_tombstone_keep.
  [[nodiscard]] ControlChange take_trigger(std::string_view job_key, std::string_view trigger_id, Instant now,
                                           std::string_view by = {});

  // ---- replica registry (replica_registry.h) -------------------------
  // One document too, changed the same way; `now` and `ttl` as below.

  /// Writes this replica's record (live for `ttl` from `now`: 10 ms to 1 h)
  /// and says whether its settings are the fleet's: those of the oldest
  /// live replica accepted so far, or this one's if none is. A replica
  /// answered `refused` must not claim. With `alone_job`, the record is
  /// written only if no other live record lists a run of that job, in the
  /// same compare-and-swap; otherwise the answer is `busy` (fleet-wide
  /// overlap: the record then lists the run this replica starts).
  /// `expired` says what becomes of the other records expired at `now`:
  /// dropped and handed to this caller to report (ReplicaAnnounce::expired),
  /// or kept, with their runs counted as running for `alone_job`, by a
  /// caller that lost touch with the store too recently to tell a dead
  /// replica from one cut off with it (docs/fleet-state.md, "Lost runs").
  enum class ExpiredRecords { report, keep };
  [[nodiscard]] ReplicaAnnounce announce_replica(const ReplicaAnnouncement& replica, Instant now,
                                                 std::chrono::nanoseconds ttl, std::string_view alone_job = {},
                                                 ExpiredRecords expired = ExpiredRecords::report);
  /// The same with several jobs alone at once (runs starting together,
  /// one compare-and-swap; each job's run listed first in `replica.runs`):
  /// a job another live replica runs is named in `busy_jobs` and its run
  /// left out of the record; a run that did not fit in the record is
  /// named in `unlisted_jobs`; the record is written unless every job is
  /// busy (the answer is then `busy`, with the first one's busy_on and
  /// busy_run, nothing written).
  [[nodiscard]] ReplicaAnnounce announce_replica(const ReplicaAnnouncement& replica, Instant now,
                                                 std::chrono::nanoseconds ttl,
                                                 std::span<const std::string_view> alone_jobs, ExpiredRecords expired);
  /// The live replicas (records not expired at `now`), oldest first.
  [[nodiscard]] RegistryRead read_replicas(Instant now);
  /// Removes the replica's record (a clean stop): `unchanged` if none was there.
  [[nodiscard]] ControlChange withdraw_replica(std::string_view replica_id, Instant now);

  // ---- job catalogue (job_catalogue.h) -------------------------------

  /// Records that a replica runs `jobs` (their seen and seen_by as given):
  /// each replaces the job's entry; entries no replica mentioned for
  /// catalogue_keep_for before `now` go. With `replica_id`, `jobs` is that
  /// replica's complete list: an entry it mentioned last (seen_by) and no
  /// longer does is marked removed at `now` (a reload dropped it), until
  /// a replica mentions it again.
  [[nodiscard]] ControlChange catalogue_jobs(std::span<const CataloguedJob> jobs, Instant now,
                                             std::string_view replica_id = {});
  /// The jobs mentioned within catalogue_keep_for before `now`, by key.
  [[nodiscard]] CatalogueRead read_catalogue(Instant now);

 protected:
  FleetState() = default;
};

/// `at` rounded down to the microsecond: what a cursor keeps.
[[nodiscard]] FLEETCRON_API Instant cursor_instant(Instant at) noexcept;

}  // namespace fleetcron
