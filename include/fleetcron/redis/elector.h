// fleetcron::redis::Elector — libtnb/cron's rediscoord Elector in C++: a
// lease on one key, taken when free and renewed by its holder; plus a
// leadership term, an optional keep-alive thread, a local renew deadline
// and resign() (those of fleetcron::LeaseElector).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/lease_elector.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// The Redis key holding the leadership lease.
inline constexpr std::string_view default_leader_key = "cron:leader";
/// The leadership lease. Failover can take one TTL.
inline constexpr std::chrono::nanoseconds default_leader_ttl = std::chrono::seconds{30};

struct FLEETCRON_API ElectorOptions {
  /// Trimmed; empty is rejected.
  std::string leader_key{default_leader_key};
  /// At least 1 ms; sent as PX in whole milliseconds (rounded up).
  std::chrono::nanoseconds lease_ttl = default_leader_ttl;
  /// The term counter. Empty: leader_key + ":term".
  std::string term_key;
  /// Renew in a background thread every lease_ttl / 3 (and campaign while
  /// a follower), so leadership stays put between sparse fires and
  /// is_leader() answers from memory. Off: is_leader() does the round trip,
  /// as libtnb/cron does, and no thread runs.
  bool keep_alive = false;
  /// With keep_alive, how often a follower campaigns: a resigned or expired
  /// lease is taken within this (plus a round trip). At least 1 ms; never
  /// longer than the renewal period.
  std::chrono::nanoseconds follower_poll_interval = std::chrono::milliseconds{500};
  /// A leader that has not renewed for lease_ttl - renew_margin on its
  /// steady clock considers itself a follower, even when Redis is
  /// unreachable. nullopt: lease_ttl / 5. 0 <= renew_margin < lease_ttl.
  std::optional<std::chrono::nanoseconds> renew_margin;
  /// The steady clock for the deadline and keep-alive waits. Default: the
  /// system clock.
  std::shared_ptr<Clock> clock;
  /// This candidate's identity, the lease key's value while it leads (the
  /// daemon: its replica id, so `status` names the leader as the registry
  /// does). Empty: 32 random hex digits. At most 128 bytes, no whitespace
  /// or control characters; it must be unique among the candidates.
  std::string holder;
};

/// What this elector knows, for metrics and `fleetcron status`.
using ElectorState = fleetcron::ElectorState;

/// Thread-safe. Each elector has an identity (ElectorOptions::holder, or
/// a random 128-bit one: 32 lowercase hex digits from the OS random
/// source); the lease key's value is the holder's identity, with
/// libtnb/cron's take-or-renew semantics, so Go and C++ replicas share
/// one leader.
///
/// Terms: taking the lease increments the counter at term_key (the new
/// value is at least the server's TIME in microseconds, so terms keep
/// growing even after Redis loses its data); the term is the fencing token
/// of leader-gated runs. A Go replica taking the lease does not count a term.
class FLEETCRON_API Elector final : public fleetcron::Elector {
 public:
  /// Throws std::invalid_argument for a null client or a rejected option,
  /// std::runtime_error if the OS random source fails.
  explicit Elector(std::shared_ptr<Client> client, ElectorOptions options = {});
  /// Stops the keep-alive thread; does not resign (call resign() for that).
  ~Elector() override;
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  /// Takes the lease when free, renews it when held, else follower. With
  /// keep_alive, answers from the last renewal while its deadline holds.
  /// Redis failures give Leadership::Status::error (fail closed).
  [[nodiscard]] Leadership is_leader() override;
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost) override;
  /// Deletes the lease if this elector still holds it (compare-and-delete),
  /// so another replica leads at its next check; stops the keep-alive
  /// thread. For good: is_leader() then answers follower without a round
  /// trip (a draining scheduler must not take the lease back).
  void resign() override;
  /// With keep_alive, while `alive()` is false a leader frees the lease at
  /// once (compare-and-delete, as resign() but not for good) and nobody
  /// campaigns: another replica leads within a follower poll.
  void set_liveness(std::function<bool()> alive) override;

  [[nodiscard]] const std::string& identity() const noexcept;
  [[nodiscard]] ElectorState state() const;
  [[nodiscard]] const ElectorOptions& options() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::redis
