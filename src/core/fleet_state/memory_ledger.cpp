#include "core/fleet_state/memory_ledger.h"
#include "fleetcron/backend/fleet_state_rules.h"

#include <fmt/format.h>

#include <algorithm>

namespace fleetcron::detail {

void MemoryLedgers::purge_expired(Clock::SteadyTime now) {
  while (!expiry_order_.empty() && expiry_order_.begin()->first <= now) {
    ledgers_.erase(expiry_order_.begin()->second);
    expiry_order_.erase(expiry_order_.begin());
  }
}

LedgerWriteResult MemoryLedgers::write(const LedgerWrite& write, Clock::SteadyTime now, Instant store_now) {
  purge_expired(now);
  const std::string& job_key = write.record.job_key;
  auto it = ledgers_.find(job_key);
  if (it == ledgers_.end()) {
    if (ledgers_.size() >= max_ledgers_) {
      return {LedgerWriteResult::Status::error,
              fmt::format("fleet state: {} ledgers live, the limit (max_cursors); fire {} not recorded",
                          ledgers_.size(), write.record.fire_key)};
    }
    it = ledgers_.emplace(job_key, Ledger{{}, expiry_order_.end()}).first;
  }
  Ledger& ledger = it->second;
  if (ledger.expiry != expiry_order_.end()) expiry_order_.erase(ledger.expiry);
  ledger.expiry = expiry_order_.emplace(now + write.retention.keep_for, job_key);
  return apply_ledger_writes(ledger.records, std::span(&write, 1), store_now).front();
}

std::vector<FireRecord> MemoryLedgers::read(std::string_view job_key, std::size_t limit, Clock::SteadyTime now) {
  purge_expired(now);
  const auto it = ledgers_.find(std::string(job_key));
  if (it == ledgers_.end()) return {};
  const auto& records = it->second.records;
  return {records.begin(), records.begin() + static_cast<std::ptrdiff_t>(std::min(limit, records.size()))};
}

std::size_t MemoryLedgers::size(Clock::SteadyTime now) {
  purge_expired(now);
  return ledgers_.size();
}

}  // namespace fleetcron::detail
