// fleetcron — fleet-wide controls of a job, kept in the fleet state: a
// pause that every replica honours (and a restarted one keeps), and
// triggers that exactly one replica runs (docs/fleet-state.md#controls).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// A request that one replica of the fleet run a job once, now. Once
/// taken, it stays in the document as a tombstone for
/// trigger_tombstone_keep after its request: the same id, `expires_at`
/// one microsecond before `requested_at` (no waiting trigger has that)
/// and the taker in `requested_by`, so a request sent again is known as
/// run, and a taker whose answer was lost finds it took it. (An earlier
/// version reads a tombstone as an expired trigger and drops it.)
struct FLEETCRON_API TriggerRequest {
  std::string id;            ///< 16 hexadecimal digits: drawn at random, or trigger_id_of() a request id
  Instant requested_at{};    ///< on the store's clock (StoreClock); the manual fire's instant
  Instant expires_at{};      ///< a trigger no replica has taken by then is dropped
  std::string requested_by;  ///< who asked (1 to 64 characters, no whitespace); a tombstone: who took it
  friend bool operator==(const TriggerRequest&, const TriggerRequest&) = default;
};

/// Whether `trigger` is the tombstone of a taken one.
[[nodiscard]] FLEETCRON_API bool is_taken_trigger(const TriggerRequest& trigger) noexcept;

/// A job's controls: whether the fleet holds it paused, and the triggers
/// waiting for a replica.
struct FLEETCRON_API JobControl {
  std::string job_key;
  bool paused = false;
  Instant changed_at{};  ///< when it was last paused or resumed
  std::string changed_by;
  std::vector<TriggerRequest> triggers = {};  ///< oldest first
  friend bool operator==(const JobControl&, const JobControl&) = default;
};

/// A trigger with its job.
struct FLEETCRON_API JobTrigger {
  std::string job_key;
  TriggerRequest trigger;
  friend bool operator==(const JobTrigger&, const JobTrigger&) = default;
};

struct FLEETCRON_API ControlsRead {
  enum class Status {
    found,  ///< `jobs` holds every job that is paused or has triggers waiting (possibly none)
    error,  ///< the store failed or holds something else; `error` says what
  };
  Status status = Status::found;
  std::vector<JobControl> jobs = {};
  std::string error = {};
  /// read_controls(): the triggers expired by `now` that the document
  /// still holds (dropped at its next change). drop_expired_triggers():
  /// those this call dropped, which no other caller is answered.
  std::vector<JobTrigger> expired = {};
  /// read_controls(): the triggers taken within trigger_tombstone_keep of
  /// their request (tombstones; `requested_by` names the taker). They are
  /// not in `jobs`, which lists waiting triggers only.
  std::vector<JobTrigger> taken = {};
  /// read_controls(): the jobs resumed within resume_record_keep, with no
  /// trigger waiting (not in `jobs`): when and by whom.
  std::vector<JobControl> resumed = {};
};

struct FLEETCRON_API ControlChange {
  enum class Status {
    changed,    ///< done: paused, resumed, trigger requested, or trigger taken (by this caller alone)
    unchanged,  ///< already so: paused (or resumed) before this call, or the request's trigger waits or was taken
    absent,     ///< take_trigger(): no such trigger waits (another replica took it, or it expired)
    error,      ///< the store failed, or a bound was reached; `error` says what
  };
  Status status = Status::error;
  std::string trigger_id = {};  ///< request_trigger(): the new trigger's id
  std::string error = {};
};

/// Bounds of the controls: jobs paused or with triggers waiting at once,
/// triggers waiting per job, how long a trigger may wait, and the size of
/// the document that holds them all.
inline constexpr std::size_t max_controlled_jobs = 1'000;
inline constexpr std::size_t max_job_triggers = 16;  ///< waiting (expired ones until reported) and taken (tombstones) together
/// How long after its request a taken trigger's tombstone stays; the
/// oldest tombstones also make room for new triggers.
inline constexpr std::chrono::nanoseconds trigger_tombstone_keep = std::chrono::hours{1};
/// How long a resumed job's record (not paused, its resume's time and
/// author) stays: a replica that applied a pause or a resume tells a store
/// that lost it (restarted from an older snapshot, failed over to a replica
/// behind) from one that never had it. The oldest make room for new
/// controls beyond max_controlled_jobs.
inline constexpr std::chrono::nanoseconds resume_record_keep = std::chrono::hours{24};
inline constexpr std::chrono::nanoseconds default_trigger_wait = std::chrono::minutes{10};
inline constexpr std::chrono::nanoseconds max_trigger_wait = std::chrono::hours{24};
inline constexpr std::size_t max_controls_bytes = 256 * 1024;

/// Throws std::invalid_argument naming the argument unless `by` is 1 to 64
/// characters without whitespace.
FLEETCRON_API void check_control_author(std::string_view by);

/// Throws std::invalid_argument naming the argument unless `request_id`
/// is 1 to 128 printable ASCII characters without whitespace.
FLEETCRON_API void check_trigger_request_id(std::string_view request_id);
/// The trigger id a request id stands for: 16 hexadecimal digits (FNV-1a,
/// 64 bits, of the job key and the request id).
[[nodiscard]] FLEETCRON_API std::string trigger_id_of(std::string_view job_key, std::string_view request_id);

}  // namespace fleetcron
