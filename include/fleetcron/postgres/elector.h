// fleetcron::postgres::Elector — libtnb/cron's postgrescoord Elector in
// C++: one cron_leader row per election name, upserted by its holder or
// over an expired lease, on the server's clock; plus a leadership term, an
// optional keep-alive thread, a local renew deadline and resign() (those of
// fleetcron::LeaseElector).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/lease_options.h"
#include "fleetcron/postgres/connection.h"
#include "fleetcron/postgres/schema.h"

namespace fleetcron::postgres {

/// The reference's election name and lease.
inline constexpr std::string_view default_leader_name = "default";
inline constexpr std::chrono::nanoseconds default_leader_ttl = std::chrono::seconds{30};

struct FLEETCRON_API ElectorOptions {
  /// Only `leader` is used.
  TableNames tables;
  /// The row's name: replicas with the same name elect one leader. Not empty.
  std::string leader_name{default_leader_name};
  /// The lease and its renewal, as LeaseElectorOptions says: lease_ttl
  /// (default 30 s; sent as float seconds, as the reference does),
  /// keep_alive, follower_poll_interval, renew_margin, clock.
  LeaseElectorOptions lease;
  /// The holder written into the row. Empty: "<hostname>-<16 hex digits>".
  std::string holder;
};

/// Thread-safe. The row's holder is this elector's identity: a Go replica
/// and a fleetcron replica with the same name elect one leader between
/// them. Terms: the row's `term` column (a fleetcron addition with a
/// default, so Go's inserts fill it) grows on every change of holder made
/// by a fleetcron replica, to at least the server's clock in µs
/// (docs/fencing.md); a Go replica taking the lease keeps the term.
class FLEETCRON_API Elector final : public fleetcron::Elector {
 public:
  /// Throws std::invalid_argument for a null connection or a rejected option.
  explicit Elector(std::shared_ptr<Connection> connection, ElectorOptions options = {});
  ~Elector() override;
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  [[nodiscard]] Leadership is_leader() override;
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost) override;
  /// Deletes the row if this elector still holds it (a conditional delete
  /// of its own row only); for good, as LeaseElector::resign().
  void resign() override;
  void set_liveness(std::function<bool()> alive) override;
  [[nodiscard]] const std::string& identity() const noexcept;
  [[nodiscard]] ElectorState state() const;
  [[nodiscard]] const ElectorOptions& options() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// The lease row as `fleetcron status` shows it.
struct FLEETCRON_API LeaderRow {
  std::string holder;
  std::uint64_t term = 0;
  std::chrono::milliseconds expires_in{0};  ///< on the server's clock
};
/// The live lease of `leader_name` (nullopt: none, or expired). Throws BackendError.
[[nodiscard]] FLEETCRON_API std::optional<LeaderRow> read_leader(Connection& connection, const TableNames& tables,
                                                                 std::string_view leader_name);

}  // namespace fleetcron::postgres
