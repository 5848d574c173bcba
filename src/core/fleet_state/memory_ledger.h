// Internal: the run ledgers of MemoryFleetState, one per job.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fleetcron/clock.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron::detail {

/// Each job's records as apply_ledger_writes() keeps them; each ledger
/// expires its retention's keep_for after its last write. Not
/// thread-safe: MemoryFleetState calls it under its mutex.
class MemoryLedgers {
 public:
  explicit MemoryLedgers(std::size_t max_ledgers) : max_ledgers_(max_ledgers) {}

  /// Trims relative to the newest record, or `store_now` if earlier.
  [[nodiscard]] LedgerWriteResult write(const LedgerWrite& write, Clock::SteadyTime now, Instant store_now);
  [[nodiscard]] std::vector<FireRecord> read(std::string_view job_key, std::size_t limit, Clock::SteadyTime now);
  /// Live ledgers right now.
  [[nodiscard]] std::size_t size(Clock::SteadyTime now);

 private:
  using ExpiryOrder = std::multimap<Clock::SteadyTime, std::string>;
  struct Ledger {
    std::vector<FireRecord> records;  // newest first
    ExpiryOrder::iterator expiry;
  };

  void purge_expired(Clock::SteadyTime now);

  std::size_t max_ledgers_;
  std::unordered_map<std::string, Ledger> ledgers_;
  ExpiryOrder expiry_order_;  // one entry per ledger
};

}  // namespace fleetcron::detail
