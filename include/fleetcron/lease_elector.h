// fleetcron::LeaseElector — an Elector over a take-or-renew lease kept in a
// store (Redis, PostgreSQL): the leadership term, the local renew deadline,
// the optional keep-alive thread, liveness and resign(), written once. A
// backend supplies the two round trips (LeaseStore).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"

namespace fleetcron {

/// A store's answer to one campaign.
struct FLEETCRON_API LeaseAnswer {
  bool leader = false;     ///< this identity holds the lease now
  std::uint64_t term = 0;  ///< the term it holds (when leader)
  std::string error;       ///< not empty: the round trip failed (fail closed)
};

/// The lease in a store. Both calls come from one thread at a time.
class FLEETCRON_API LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  /// Takes the lease for `identity` when it is free or expired, renews it
  /// when `identity` holds it (for `ttl` from now, in the store's time).
  /// `known_term` is the term this elector last held (0: none); with
  /// `fresh_term` the lease must be taken under a new, larger term even if
  /// `identity` still holds it (the elector demoted itself meanwhile).
  /// Never throws: failures are answers with an error.
  [[nodiscard]] virtual LeaseAnswer campaign(std::string_view identity, std::chrono::nanoseconds ttl,
                                             std::uint64_t known_term, bool fresh_term) = 0;
  /// Deletes the lease if `identity` still holds it (only then). Returns
  /// the error, empty on success.
  [[nodiscard]] virtual std::string release(std::string_view identity) = 0;
};

struct FLEETCRON_API LeaseElectorOptions {
  /// The lease; at least 1 ms.
  std::chrono::nanoseconds lease_ttl = std::chrono::seconds{30};
  /// Renew in a background thread every lease_ttl / 3 (and campaign while a
  /// follower), so leadership stays put between sparse fires and is_leader()
  /// answers from memory. Off: is_leader() does the round trip, as
  /// libtnb/cron does, and no thread runs.
  bool keep_alive = false;
  /// With keep_alive, how often a follower campaigns. At least 1 ms.
  std::chrono::nanoseconds follower_poll_interval = std::chrono::milliseconds{500};
  /// A leader that has not renewed for lease_ttl - renew_margin on its
  /// steady clock considers itself a follower, even when the store is
  /// unreachable. nullopt: lease_ttl / 5. 0 <= renew_margin < lease_ttl.
  std::optional<std::chrono::nanoseconds> renew_margin;
  /// The steady clock for the deadline and keep-alive waits. Default: the
  /// system clock.
  std::shared_ptr<Clock> clock;
};

/// What an elector knows, for metrics and `fleetcron status`.
struct FLEETCRON_API ElectorState {
  bool leader = false;
  std::uint64_t term = 0;                        // the term led (or last led); 0 if never
  std::optional<Clock::SteadyTime> valid_until;  // local renew deadline while leading
  std::string last_error;                        // the last failed round trip's error, if the last one failed
};

/// Thread-safe. `identity` names this replica in the store.
class FLEETCRON_API LeaseElector final : public Elector {
 public:
  /// Throws std::invalid_argument for a null store, an empty identity or a
  /// rejected option; the message starts with `options_name` (for example
  /// "redis::ElectorOptions") and names the option and the value.
  LeaseElector(std::shared_ptr<LeaseStore> store, std::string identity, LeaseElectorOptions options,
               std::string_view options_name = "LeaseElectorOptions");
  /// Stops the keep-alive thread; does not resign (call resign() for that).
  ~LeaseElector() override;
  LeaseElector(const LeaseElector&) = delete;
  LeaseElector& operator=(const LeaseElector&) = delete;

  /// Takes the lease when free, renews it when held, else follower. With
  /// keep_alive, answers from the last renewal while its deadline holds.
  /// Store failures give Leadership::Status::error (fail closed).
  [[nodiscard]] Leadership is_leader() override;
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost) override;
  /// Releases the lease if this elector still holds it, so another replica
  /// leads at its next check; stops the keep-alive thread. For good:
  /// is_leader() then answers follower without a round trip (a draining
  /// scheduler must not take the lease back).
  void resign() override;
  /// With keep_alive, while `alive()` is false a leader frees the lease at
  /// once (as resign() but not for good) and nobody campaigns: another
  /// replica leads within a follower poll.
  void set_liveness(std::function<bool()> alive) override;

  [[nodiscard]] const std::string& identity() const noexcept;
  [[nodiscard]] ElectorState state() const;
  [[nodiscard]] const LeaseElectorOptions& options() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// `bytes` (1 to 64) bytes from the OS random source as twice as many
/// lowercase hex digits. Throws std::runtime_error if the source fails.
[[nodiscard]] FLEETCRON_API std::string random_hex(std::size_t bytes = 16);

}  // namespace fleetcron
