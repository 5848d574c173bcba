// fleetcron — the contract between the scheduler and a coordination backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/time.h"

namespace fleetcron {

/// The answer to Claimer::claim().
struct FLEETCRON_API ClaimResult {
  enum class Status {
    claimed,          ///< this process runs the fire; `fence` is its token
    already_claimed,  ///< another replica has it (normal contention)
    error,            ///< the backend failed: the fire is skipped (fail closed)
    clock_skew,       ///< refused: the local clock is too far from the store's (fail closed)
    store_reset,      ///< refused: the store lost its data (or may have) after this fire could
                      ///< have been claimed; `error` names the epoch (fail closed)
  };
  Status status = Status::error;
  /// A token from a counter that only increases across the whole store;
  /// passed to the job as FireContext::fence. 0 unless claimed.
  std::uint64_t fence = 0;
  /// What went wrong, for Status::error and clock_skew; never contains secrets.
  std::string error;

  [[nodiscard]] static ClaimResult claimed(std::uint64_t fence) { return {Status::claimed, fence, {}}; }
  [[nodiscard]] static ClaimResult taken() { return {Status::already_claimed, 0, {}}; }
  [[nodiscard]] static ClaimResult failed(std::string error) { return {Status::error, 0, std::move(error)}; }
  [[nodiscard]] static ClaimResult skewed(std::string error) { return {Status::clock_skew, 0, std::move(error)}; }
  [[nodiscard]] static ClaimResult reset(std::string error) { return {Status::store_reset, 0, std::move(error)}; }
};

/// How far the local wall clock is from a store's (Redis's TIME, the
/// timestamps NATS gives writes), as the claimers' skew guards measure it.
struct FLEETCRON_API ClockOffset {
  /// Server time minus local time (positive: the local clock is behind).
  std::chrono::microseconds offset{0};
  /// When it was measured, on the local steady clock.
  Clock::SteadyTime measured_at{};
};

/// Decides which replica runs a fire. claim() is called once per automatic
/// fire, with the fire key (see fire_key()), from a worker thread; it must
/// be thread-safe and bounded in time. A claim is kept until its TTL ends,
/// never released early, so a late replica cannot run the fire again.
class FLEETCRON_API Claimer {
 public:
  virtual ~Claimer() = default;
  [[nodiscard]] virtual ClaimResult claim(std::string_view fire_key) = 0;

  /// Claims several fires at once: one result per key, in order. The
  /// scheduler calls it for fires due at the same instant (no jitter), so
  /// a networked claimer can decide them in one round trip. The default
  /// calls claim() for each key.
  [[nodiscard]] virtual std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys);

  /// Looks, without claiming anything, which of these fires a replica has
  /// claimed already: one answer per key, in order, true if claimed. The
  /// scheduler asks it (a few times per fire at most) for the fires queued
  /// behind a claim batch that no free worker could take, and drops those
  /// claimed elsewhere (skipped, already_claimed) instead of trying each
  /// alone as its workers free up (docs/scheduler.md, "Claim batches").
  /// An empty answer (the default), or one that fails, tells nothing: the
  /// fires are claimed as usual. A false answer never runs a fire: only claim() does.
  [[nodiscard]] virtual std::vector<bool> already_claimed(std::span<const std::string> fire_keys);
  /// Whether already_claimed() can tell: the scheduler takes fires to look
  /// at only then. Default: false.
  [[nodiscard]] virtual bool tells_already_claimed() const { return false; }

  /// How long after a fire's scheduled instant any claim on it is certain
  /// to still be in the store, whatever replica made it (its TTL minus what
  /// clock differences between replicas can eat). The scheduler does not
  /// claim a fire older than this — late on-time fires and missed-fire
  /// replays alike — but skips it (SkipReason::stale): the claim another
  /// replica made may have expired, and claiming again could run the fire
  /// twice. Default: no limit (a claimer whose claims never expire).
  [[nodiscard]] virtual std::chrono::nanoseconds dedup_window() const { return std::chrono::nanoseconds::max(); }

  /// Throws std::invalid_argument, naming the key and the limit, if the
  /// fire keys of an entry with this key cannot be stored by this backend
  /// (e.g. NATS's key length limit). Scheduler::add() and check() call it,
  /// so such an entry is refused up front instead of failing every claim.
  /// Default: every key is accepted.
  virtual void check_entry_key(std::string_view key) const { (void)key; }

 protected:
  Claimer() = default;
};

/// The answer to Elector::is_leader().
struct FLEETCRON_API Leadership {
  enum class Status { leader, follower, error };
  Status status = Status::error;
  /// The leadership term: increases every time leadership changes hands.
  /// Valid when status is leader.
  std::uint64_t term = 0;
  std::string error;

  [[nodiscard]] static Leadership leader(std::uint64_t term) { return {Status::leader, term, {}}; }
  [[nodiscard]] static Leadership follower() { return {Status::follower, 0, {}}; }
  [[nodiscard]] static Leadership failed(std::string error) { return {Status::error, 0, std::move(error)}; }
};

/// Decides whether this process is the leader. is_leader() is called once
/// per automatic fire from a worker thread: it must be cheap, thread-safe
/// and bounded in time.
class FLEETCRON_API Elector {
 public:
  virtual ~Elector() = default;
  [[nodiscard]] virtual Leadership is_leader() = 0;

  /// The scheduler registers here, once, before it starts; the elector
  /// calls `lost(term)` when this process stops leading `term` (lease
  /// expired or taken, resigned). It may be called from any thread. The
  /// default elector never calls it.
  virtual void on_leadership_lost(std::function<void(std::uint64_t term)> lost) { (void)lost; }

  /// Gives up leadership now, if held (graceful hand-over). Default: no-op.
  virtual void resign() {}

  /// The scheduler registers here, once, before it starts: `alive()` is
  /// false while its loop makes no progress (wedged). An elector that
  /// renews in the background must neither renew nor campaign while it is
  /// false, so a wedged leader loses the lease within its TTL and a wedged
  /// follower does not take it. It may be called from any thread and is
  /// cheap. Default: ignored.
  virtual void set_liveness(std::function<bool()> alive) { (void)alive; }

 protected:
  Elector() = default;
};

/// The fire key: `key + "@" + scheduled instant in UTC as RFC 3339 with
/// nanoseconds and trailing zeros trimmed`, byte for byte libtnb/cron
/// v0.6's format, e.g. "hourly-report@2026-01-02T15:04:05Z" or
/// "k@2026-01-02T15:04:05.5Z".
[[nodiscard]] FLEETCRON_API std::string fire_key(std::string_view key, Instant scheduled_at);

/// The scheduled instant of a fire key made by fire_key(): the RFC 3339
/// text after its last '@'; nullopt if there is none. Backends use it to
/// refuse fires from before a store reset (ClaimResult::Status::store_reset).
[[nodiscard]] FLEETCRON_API std::optional<Instant> fire_key_instant(std::string_view fire_key);

}  // namespace fleetcron
