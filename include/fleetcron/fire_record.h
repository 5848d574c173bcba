// fleetcron — the run ledger's record: what became of one fire, kept in
// the fleet state once for the whole fleet (docs/fleet-state.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// What became of a fire.
enum class FireFate {
  skipped,    ///< not run, for `reason` (claim-error, clock-skew, stale, overlap, …)
  missed,     ///< not run: the missed-fire policy dropped it (`missed_count` instants up to `last_missed`)
  cancelled,  ///< claimed by this replica and dropped before its job started, or stopped while it ran
  running,    ///< its job started (attempt 1) and has not finished
  lost,       ///< its runner stopped before it finished
  succeeded,
  failed,
  timed_out,
};
[[nodiscard]] FLEETCRON_API std::string_view to_string(FireFate fate) noexcept;
[[nodiscard]] FLEETCRON_API std::optional<FireFate> fire_fate_from_string(std::string_view text) noexcept;

/// The ledger's bounds on one record's text; longer text is cut (the
/// output keeps its end, the others their start) before it is stored.
inline constexpr std::size_t max_output_tail_bytes = 4096;
inline constexpr std::size_t max_fire_error_bytes = 1024;
inline constexpr std::size_t max_fire_reason_bytes = 256;
/// A stored record is at most this long (every field at its bound fits).
inline constexpr std::size_t max_fire_record_bytes = 16 * 1024;

/// One fire's entry in its job's ledger.
struct FLEETCRON_API FireRecord {
  std::string job_key;
  /// job key + "@" + the instant (the manual trigger's time for manual fires).
  std::string fire_key;
  Instant scheduled_at{};
  FireFate fate = FireFate::skipped;
  bool manual = false;
  /// The replica that ran it, skipped it, or reported it.
  std::string replica_id;
  std::uint64_t fence = 0;  ///< the run's fencing token (0 when none)
  int attempts = 0;         ///< attempts made (0 when the job never started)
  std::optional<Instant> started_at;
  std::optional<Instant> finished_at;
  std::chrono::nanoseconds duration{0};
  std::optional<int> exit_status;  ///< the daemon's command: its exit status
  std::optional<int> signal;       ///< … or the signal that ended it
  /// The skip reason (to_string(SkipReason)), the cancel reason, or the
  /// missed-fire policy's decision; empty for runs.
  std::string reason;
  std::string error;        ///< the last attempt's error, or the coordination error
  std::string output_tail;  ///< the last bytes of the job's output
  /// For `missed`: how many instants the policy dropped (scheduled_at is
  /// the first, last_missed the last).
  std::uint64_t missed_count = 0;
  std::optional<Instant> last_missed;

  friend bool operator==(const FireRecord&, const FireRecord&) = default;
};

/// How a ledger write ranks against the record already kept for the same
/// fire key: a write replaces only a record of a lower rank, so whichever
/// replica writes first, the fire's fate is the one that happened — a run
/// outranks another replica's skip of the same fire, a finished run its
/// running record. A follower's skip (reason "not-leader") and a missed
/// record of one instant (a replica's late loop; its fire key has no
/// "#missed") 0, other skipped and missed 1, cancelled before the job 2,
/// running 3, lost 4, finished (cancelled after the start included) 5.
[[nodiscard]] FLEETCRON_API int ledger_rank(const FireRecord& record) noexcept;

/// How long a job's ledger keeps its records: the newest `keep_count`
/// (1 to 10,000), none scheduled more than `keep_for` (1 ms to 400 days)
/// before the newest, and the whole ledger `keep_for` after its last
/// write. Defaults: 100 records, 30 days.
struct FLEETCRON_API LedgerRetention {
  static constexpr std::size_t max_keep_count = 10'000;
  static constexpr std::chrono::nanoseconds max_keep_for = std::chrono::hours{24 * 400};
  std::size_t keep_count = 100;
  std::chrono::nanoseconds keep_for = std::chrono::hours{24 * 30};

  friend bool operator==(const LedgerRetention&, const LedgerRetention&) = default;
};

/// Throws std::invalid_argument naming the field and the value unless
/// `retention` is within its bounds.
FLEETCRON_API void check_ledger_retention(const LedgerRetention& retention);

/// Throws std::invalid_argument naming what is wrong unless `record` has a
/// job key that is not blank, a fire key that starts with it and "@", a
/// replica id of 1 to 64 characters without whitespace, and text fields
/// within their bounds (cut_fire_record() cuts them).
FLEETCRON_API void check_fire_record(const FireRecord& record);

/// `record` with reason, error and output cut to their bounds.
[[nodiscard]] FLEETCRON_API FireRecord cut_fire_record(FireRecord record);

}  // namespace fleetcron
