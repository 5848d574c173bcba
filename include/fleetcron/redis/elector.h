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
#include "fleetcron/lease_options.h"
#include "fleetcron/redis/client.h"

namespace fleetcron::redis {

/// The Redis key holding the leadership lease.
inline constexpr std::string_view default_leader_key = "cron:leader";
/// The leadership lease. Failover can take one TTL.
inline constexpr std::chrono::nanoseconds default_leader_ttl = std::chrono::seconds{30};

struct FLEETCRON_API ElectorOptions {
  /// Trimmed; empty is rejected.
  std::string leader_key{default_leader_key};
  /// The term counter. Empty: leader_key + ":term".
  std::string term_key;
  /// The lease and its renewal, as LeaseElectorOptions says: lease_ttl
  /// (default 30 s; sent to Redis as PX in whole milliseconds, rounded up),
  /// keep_alive, follower_poll_interval, renew_margin, clock.
  LeaseElectorOptions lease;
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
