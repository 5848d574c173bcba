// fleetcron::LeaseElector — an Elector over a take-or-renew lease kept in a
// store (Redis, PostgreSQL): the leadership term, the local renew deadline,
// the optional keep-alive thread, liveness and resign(), written once. A
// backend supplies the two round trips (LeaseStore). For backend authors;
// the options and state its users see are lease_options.h.
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
#include "fleetcron/lease_options.h"

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
