// Everything the daemon and its commands do that depends on the store that
// coordinates the fleet, behind one interface: one implementation per
// backend (memory, Redis, NATS, PostgreSQL), chosen by the coordinator
// setting. Nothing else in the daemon names a backend: a fifth one is its
// own file here and one row in backend.cpp's table.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/config/settings.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/coordination.h"
#include "fleetcron/diagnostics.h"
#include "fleetcron/fleet_state.h"

namespace fleetcron::daemon {

/// A store's coordination as the daemon uses it.
struct Coordination {
  std::shared_ptr<Claimer> claimer;  // set for claim and both
  std::shared_ptr<Elector> elector;  // set for leader and both
  /// The fleet state (in memory for the memory coordinator, where it lives
  /// and dies with the process); null when catch-up and the ledger are
  /// both off (keeps_fleet_state()).
  std::shared_ptr<FleetState> fleet_state;
  std::shared_ptr<Diagnostics> diagnostics;  // never null
  std::string description;                        // where it connects; no secrets
  /// Worth a warning at start: an event name and its message each (e.g. a
  /// TLS connection whose certificate is not verified).
  std::vector<std::pair<std::string, std::string>> warnings;
  std::shared_ptr<void> resources;  // connections and the like, kept alive
  /// What the replica registry compares between replicas (Backend::dedup_settings()).
  std::vector<ReplicaSetting> replica_settings;
};

/// True when the daemon keeps a fleet state: catch-up or the ledger is on.
[[nodiscard]] bool keeps_fleet_state(const Settings& settings) noexcept;

/// One coordination backend, as the daemon and its commands use it.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Its name in messages ("Redis").
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The coordinator forms it takes, for the error naming them all
  /// ("redis://…, rediss://…").
  [[nodiscard]] virtual std::string_view forms() const = 0;
  /// True if the coordinator setting names this backend.
  [[nodiscard]] virtual bool accepts(std::string_view coordinator) const = 0;
  /// The environment variable that may give the coordinator's password
  /// (empty: the backend takes none).
  [[nodiscard]] virtual std::string_view password_variable() const { return {}; }
  /// True when the store lives in this process: there is no fleet outside
  /// it for a command to read or change.
  [[nodiscard]] virtual bool in_process() const { return false; }
  /// What `--version` says of it: the backend and the libraries under it.
  [[nodiscard]] virtual std::string build_info() const = 0;
  /// True when Diagnostics::check_config() reads something
  /// (--require-noeviction needs it).
  [[nodiscard]] virtual bool checks_config() const { return false; }

  /// The settings two replicas of one fleet must share, or their claims
  /// and leases would not deduplicate each other: the mode, for claims the
  /// claim TTL, the skew guard and where claims live, for leadership the
  /// lease TTL and where the lease lives. Durations as format_duration()
  /// writes them, defaults resolved.
  [[nodiscard]] std::vector<ReplicaSetting> dedup_settings(const Settings& settings) const;

  /// The claimer, elector, fleet state and diagnostics the settings ask
  /// for. Networked stores connect lazily (calls fail closed until the
  /// server answers). `holder` names this replica as a leader candidate.
  /// Throws std::invalid_argument for bad URIs or options.
  [[nodiscard]] virtual Coordination connect(const Settings& settings, const std::string& holder) const = 0;
  /// The claimer the settings ask for, without connecting (claims fail),
  /// with the real one's dedup window and key rules; nullptr in leader
  /// mode. For `fleetcron validate`.
  [[nodiscard]] virtual std::shared_ptr<Claimer> offline_claimer(const Settings& settings) const = 0;
  /// The leader as the store holds it and, `with_claims`, the recent
  /// claims where the store can list them. Throws std::runtime_error
  /// (escaped) or BackendError.
  [[nodiscard]] virtual StoreView read_view(const Settings& settings, bool with_claims) const = 0;
  /// The fleet state alone, for the commands that read or change it
  /// without a daemon. Throws if it cannot be reached.
  [[nodiscard]] virtual std::shared_ptr<FleetState> open_fleet_state(const Settings& settings) const = 0;
  /// `fleetcron init`: declares the store new. 0, 1 (error on `err`) or 2.
  virtual int init(const Settings& settings, std::ostream& out, std::ostream& err) const = 0;
  /// `fleetcron migrate`: creates what the store needs. Default: refuses
  /// (2), the store needs nothing created.
  virtual int migrate(const Settings& settings, std::ostream& out, std::ostream& err) const;

 protected:
  /// Where this backend's claims live ({"claim_prefix", "cron:claim:"}).
  [[nodiscard]] virtual std::optional<ReplicaSetting> claim_place(const Settings& settings) const = 0;
  /// The lease TTL when the settings give none.
  [[nodiscard]] virtual std::chrono::nanoseconds default_leader_ttl() const = 0;
  /// Where this backend's lease lives (its key, table or bucket).
  [[nodiscard]] virtual std::vector<ReplicaSetting> lease_place(const Settings& settings) const = 0;
};

/// The backend the coordinator setting names. Throws SettingsError naming
/// every form accepted.
[[nodiscard]] const Backend& backend_for(std::string_view coordinator);

/// Every backend, in the order backend_for() tries them.
[[nodiscard]] std::vector<const Backend*> backends();

/// The backends, one each (for the table).
[[nodiscard]] const Backend& memory_backend();
[[nodiscard]] const Backend& redis_backend();
[[nodiscard]] const Backend& nats_backend();
[[nodiscard]] const Backend& postgres_backend();

}  // namespace fleetcron::daemon
