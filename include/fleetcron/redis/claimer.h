// fleetcron::redis::Claimer — libtnb/cron's rediscoord Claimer in C++:
// one Redis key per fire, set if absent with a TTL and kept until it
// expires; plus a fencing token and a clock-skew guard.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// The time a fire claim stays reserved. It must cover the largest
/// expected jitter, clock skew and delayed catch-up window.
inline constexpr std::chrono::nanoseconds default_claim_ttl = std::chrono::minutes{10};
/// Namespaces fire claims in Redis.
inline constexpr std::string_view default_claim_prefix = "cron:claim:";

struct FLEETCRON_API ClaimerOptions {
  /// Claims are stored at claim_prefix + fire key. Empty is allowed.
  std::string claim_prefix{default_claim_prefix};
  /// At least 1 ms; sent as PX in whole milliseconds (rounded up).
  std::chrono::nanoseconds claim_ttl = default_claim_ttl;
  /// The counter behind fencing tokens. Empty: claim_prefix + "fence"
  /// (fire keys always contain '@', so it never collides with a claim).
  std::string fence_key;
  /// The store's reset epoch record (no TTL). Empty: claim_prefix + "epoch".
  /// See docs/reliability.md, "Store resets".
  std::string epoch_key;
  /// Claims are refused (ClaimResult::Status::clock_skew) while the local
  /// wall clock differs from the server's TIME by more than this. nullopt:
  /// claim_ttl / 4. Two replicas inside the guard differ by at most twice
  /// it, so fires up to claim_ttl - 2 * max_clock_skew old are deduplicated
  /// (dedup_window()). Must be positive and below claim_ttl / 2.
  std::optional<std::chrono::nanoseconds> max_clock_skew;
  /// clock_offset() measures again (a TIME round trip) when its last
  /// measurement is older than this; every claim measures too. 1 ms .. 1 h.
  std::chrono::nanoseconds skew_refresh_interval = std::chrono::seconds{30};
  /// The local clock: pass the scheduler's. Default: the system clock.
  std::shared_ptr<Clock> clock;
};

/// How far the local wall clock is from the Redis server's.
using fleetcron::ClockOffset;

/// What Claimer::declare_new_store() found, and whether it wrote.
struct FLEETCRON_API NewStoreDeclaration {
  enum class Status {
    declared,      ///< the epoch record is written: no fire is refused as scheduled before a reset
    has_epoch,     ///< an epoch record was there (`found`): a replica claimed here first, or init ran before
    holds_claims,  ///< no epoch record, but a fence counter (`found`): claims were made here, so not new
  };
  Status status = Status::declared;
  std::string found;  ///< the epoch record, or the fence counter's value
};

/// Thread-safe. claim() is one round trip (a script: skew check, SET NX
/// with PX, and the fence counter, atomically); claim_batch() pipelines
/// any number of claims in one round trip.
///
/// On the wire a claim is the key claim_prefix + fire key with a TTL, as
/// libtnb/cron's Claimer writes it (it stores "1"; fleetcron stores the
/// fence): a Go replica and a fleetcron replica on the same Redis never
/// both run one fire. Claims are never deleted.
class FLEETCRON_API Claimer final : public fleetcron::Claimer {
 public:
  /// Throws std::invalid_argument for a null client or an option that
  /// rejects its value (the message names the option and the value).
  explicit Claimer(std::shared_ptr<Client> client, ClaimerOptions options = {});
  ~Claimer() override;
  Claimer(const Claimer&) = delete;
  Claimer& operator=(const Claimer&) = delete;

  /// A blank fire key is an error result; any Redis failure is an error
  /// result (fail closed), never an exception.
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  [[nodiscard]] std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys) override;
  /// One MGET of the claim keys; a Redis failure tells nothing (empty).
  [[nodiscard]] std::vector<bool> already_claimed(std::span<const std::string> fire_keys) override;
  [[nodiscard]] bool tells_already_claimed() const override { return true; }
  /// claim_ttl - 2 * max_clock_skew (5 min with the defaults).
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override;

  /// The last measured offset to the server's clock, measured again first
  /// if older than skew_refresh_interval; nullopt if the server cannot be
  /// reached and nothing was measured before.
  [[nodiscard]] std::optional<ClockOffset> clock_offset();

  /// Declares the store new (`fleetcron init`, docs/redis.md "A new
  /// store"): writes an epoch record older than any fire, in one script,
  /// unless the store has an epoch record or a fence counter. Without it a
  /// new store is taken for one that lost its data, and the fires of its
  /// first max_clock_skew are refused. Run it only on a store that never
  /// held this fleet's claims: on one that lost them, it hides the loss.
  /// Throws BackendError.
  [[nodiscard]] NewStoreDeclaration declare_new_store();

  [[nodiscard]] const ClaimerOptions& options() const noexcept;
  /// How many of this claimer's calls found a store reset (and wrote a new
  /// epoch); for metrics and tests.
  [[nodiscard]] std::uint64_t resets_found() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::redis
