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

/// A request that one replica of the fleet run a job once, now.
struct FLEETCRON_API TriggerRequest {
  std::string id;            ///< 16 hexadecimal digits, drawn at random per request
  Instant requested_at{};    ///< on the store's clock (StoreClock); the manual fire's instant
  Instant expires_at{};      ///< a trigger no replica has taken by then is dropped
  std::string requested_by;  ///< who asked (1 to 64 characters, no whitespace)
  friend bool operator==(const TriggerRequest&, const TriggerRequest&) = default;
};

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

/// A trigger that no replica took before it expired, with its job.
struct FLEETCRON_API ExpiredTrigger {
  std::string job_key;
  TriggerRequest trigger;
  friend bool operator==(const ExpiredTrigger&, const ExpiredTrigger&) = default;
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
  std::vector<ExpiredTrigger> expired = {};
};

struct FLEETCRON_API ControlChange {
  enum class Status {
    changed,    ///< done: paused, resumed, trigger requested, or trigger taken (by this caller alone)
    unchanged,  ///< already so: paused (or resumed) before this call
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
inline constexpr std::size_t max_job_triggers = 16;
inline constexpr std::chrono::nanoseconds default_trigger_wait = std::chrono::minutes{10};
inline constexpr std::chrono::nanoseconds max_trigger_wait = std::chrono::hours{24};
inline constexpr std::size_t max_controls_bytes = 256 * 1024;

/// Throws std::invalid_argument naming the argument unless `by` is 1 to 64
/// characters without whitespace.
FLEETCRON_API void check_control_author(std::string_view by);

/// The controls as the stores keep them: one line per job, in the order
/// given: "1 <job> <paused 0|1> <changed µs|-> <by|-> <n>", then for each
/// trigger " <id> <requested µs> <expires µs> <by>". Text fields are
/// percent-encoded as in fire records.
[[nodiscard]] FLEETCRON_API std::string format_job_controls(std::span<const JobControl> jobs);
/// The controls in that text; nullopt if it is not such a document.
[[nodiscard]] FLEETCRON_API std::optional<std::vector<JobControl>> parse_job_controls(std::string_view text);

}  // namespace fleetcron
