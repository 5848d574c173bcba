// fleetcron — what an operator asks a coordination store beside claims and
// leadership: does it answer, how far is its clock, is it configured and
// created as the promise needs. Every backend gives one (make_diagnostics()
// in its diagnostics.h), so a program checks any store the same way.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/coordination.h"

namespace fleetcron {

/// The store's own configuration, as far as the promise depends on it
/// (Redis: its maxmemory-policy), read at one moment.
struct FLEETCRON_API StoreConfig {
  bool answered = false;    ///< the store answered (with the value or an error reply)
  bool safe = false;        ///< known to keep claims and leases until they expire
  std::string value;        ///< what was read ("noeviction"); empty if unreadable
  std::string description;  ///< one line for a log: the value and what to do about it
};

/// A store's diagnostics. Thread-safe; each call is bounded by the
/// backend's own timeouts.
class FLEETCRON_API Diagnostics {
 public:
  virtual ~Diagnostics() = default;
  /// Asks the store for an answer: returns if it answered, throws
  /// BackendError saying why not (AuthError and ConfigError: refused for
  /// good, not an outage).
  virtual void ping() = 0;
  /// Store clock minus this host's as the claimer measures it (it may
  /// measure again when its last measure is old); nullopt when not
  /// measured yet, without a claimer, or for a store without a clock.
  [[nodiscard]] virtual std::optional<ClockOffset> clock_offset() { return std::nullopt; }
  /// Reads the store's configuration now (one round trip; never throws);
  /// nullopt: this store has none that matters.
  [[nodiscard]] virtual std::optional<StoreConfig> check_config() { return std::nullopt; }
  /// What the store lacks that `fleetcron migrate` (or the backend's
  /// migrate()) creates, one line each; empty: complete. Throws
  /// BackendError when the store cannot be asked.
  [[nodiscard]] virtual std::vector<std::string> missing_schema() { return {}; }

 protected:
  Diagnostics() = default;
};

/// The diagnostics of an in-process store (MemoryClaimer, MemoryLease,
/// MemoryFleetState): it always answers, and has no clock, configuration
/// or schema of its own.
[[nodiscard]] FLEETCRON_API std::shared_ptr<Diagnostics> memory_diagnostics();

}  // namespace fleetcron
