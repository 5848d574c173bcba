#include "fleetcron/memory_fleet_state.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/fleet_state/memory_ledger.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron {

struct FLEETCRON_LOCAL MemoryFleetState::State {
  using ExpiryOrder = std::multimap<Clock::SteadyTime, std::string>;
  struct Record {
    JobCursor cursor;
    std::optional<ExpiryOrder::iterator> expiry;  // this record's place in expiry_order
  };

  std::shared_ptr<Clock> clock;
  std::size_t max_cursors = 0;
  mutable std::mutex mutex;  // guards the members below
  std::unordered_map<std::string, Record> cursors;
  ExpiryOrder expiry_order;  // one entry per record
  std::unique_ptr<detail::MemoryLedgers> ledgers;
  struct Document {
    std::optional<std::string> text;              // nullopt: absent
    std::optional<Clock::SteadyTime> expires_at;  // nullopt: kept until replaced
    std::uint64_t revision = 0;                   // one more on every replacement
  };
  std::array<Document, FleetState::document_slots> documents;  // by FleetState::slot()

  Document& document(FleetState::DocumentId which, Clock::SteadyTime now) {
    Document& found = documents.at(FleetState::slot(which));
    if (found.expires_at && *found.expires_at <= now) {
      found.text.reset();
      found.expires_at.reset();
    }
    return found;
  }

  void purge_expired(Clock::SteadyTime now) {
    while (!expiry_order.empty() && expiry_order.begin()->first <= now) {
      cursors.erase(expiry_order.begin()->second);
      expiry_order.erase(expiry_order.begin());
    }
  }

  /// The live record of `job_key`, or nullptr.
  Record* find(std::string_view job_key, Clock::SteadyTime now) {
    purge_expired(now);
    const auto it = cursors.find(std::string(job_key));
    return it == cursors.end() ? nullptr : &it->second;
  }

  void expire_at(Record& record, std::string job_key, Clock::SteadyTime at) {  // a copy: the old entry goes first
    if (record.expiry) expiry_order.erase(*record.expiry);
    record.expiry = expiry_order.emplace(at, std::move(job_key));
  }

  /// Writes the cursor (its version one more than the record's); the
  /// record, or an error message if a new job would pass the bound.
  std::pair<Record*, std::string> write(std::string_view job_key, Instant instant, std::uint64_t digest,
                                        std::string_view claimant, Clock::SteadyTime expires_at) {
    auto it = cursors.find(std::string(job_key));
    if (it == cursors.end()) {
      if (cursors.size() >= max_cursors) {
        return {nullptr, fmt::format("fleet state: {} cursors live, the limit (max_cursors); job \"{}\" not recorded",
                                     cursors.size(), job_key)};
      }
      it = cursors.emplace(std::string(job_key), Record{}).first;
    }
    JobCursor& cursor = it->second.cursor;
    cursor = JobCursor{cursor_instant(instant), digest, cursor.version + 1, std::string(claimant), {}};
    expire_at(it->second, it->first, expires_at);
    return {&it->second, {}};
  }
};

MemoryFleetState::MemoryFleetState(std::shared_ptr<Clock> clock, std::size_t max_cursors)
    : state_(std::make_unique<State>()) {
  if (!clock) throw std::invalid_argument("MemoryFleetState: clock is null");
  if (max_cursors == 0) throw std::invalid_argument("MemoryFleetState: max_cursors 0 is below the minimum of 1");
  state_->clock = std::move(clock);
  state_->max_cursors = max_cursors;
  state_->ledgers = std::make_unique<detail::MemoryLedgers>(max_cursors);
}

MemoryFleetState::~MemoryFleetState() = default;

CursorRead MemoryFleetState::read_cursor(std::string_view job_key) {
  check_job_key(job_key);
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  const State::Record* record = state_->find(job_key, now);
  if (record == nullptr) return {CursorRead::Status::absent, std::nullopt, {}};
  return {CursorRead::Status::found, record->cursor, {}};
}

CursorAdvance MemoryFleetState::advance_cursor(std::string_view job_key, Instant instant,
                                               std::uint64_t schedule_digest, std::chrono::nanoseconds keep_for) {
  check_cursor_arguments(job_key, keep_for);
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  State::Record* record = state_->find(job_key, now);
  if (record != nullptr && record->cursor.instant >= cursor_instant(instant)) {
    state_->expire_at(*record, std::string(job_key), now + keep_for);  // only the expiry is refreshed
    return {CursorAdvance::Status::already_past, record->cursor, {}};
  }
  auto [written, error] = state_->write(job_key, instant, schedule_digest, {}, now + keep_for);
  if (written == nullptr) return {CursorAdvance::Status::error, std::nullopt, std::move(error)};
  return {CursorAdvance::Status::moved, written->cursor, {}};
}

CatchUpClaim MemoryFleetState::claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                              Instant instant, std::uint64_t schedule_digest,
                                              std::chrono::nanoseconds keep_for, std::string_view claimant) {
  check_catch_up_arguments(job_key, keep_for, seen, instant, claimant);
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  const State::Record* record = state_->find(job_key, now);
  const bool unchanged = seen ? record != nullptr && record->cursor == *seen : record == nullptr;
  if (!unchanged) {
    return {CatchUpClaim::Status::superseded,
            record != nullptr ? std::optional<JobCursor>(record->cursor) : std::nullopt, {}};
  }
  auto [written, error] = state_->write(job_key, instant, schedule_digest, claimant, now + keep_for);
  if (written == nullptr) return {CatchUpClaim::Status::error, std::nullopt, std::move(error)};
  return {CatchUpClaim::Status::claimed, written->cursor, {}};
}

std::vector<LedgerWriteResult> MemoryFleetState::record_fires(std::span<const LedgerWrite> writes) {
  check_ledger_writes(writes);
  const auto now = state_->clock->steady_now();
  const Instant store_now = state_->clock->now();
  std::vector<LedgerWriteResult> results;
  results.reserve(writes.size());
  std::lock_guard guard(state_->mutex);
  for (const auto& write : writes) results.push_back(state_->ledgers->write(write, now, store_now));
  return results;
}

LedgerRead MemoryFleetState::read_fires(std::string_view job_key, std::size_t limit) {
  check_ledger_read(job_key, limit);
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  return {LedgerRead::Status::found, state_->ledgers->read(job_key, limit, now), {}};
}

std::optional<Instant> MemoryFleetState::store_now() { return state_->clock->now(); }

FleetState::StoredDocument MemoryFleetState::load_document(DocumentId which) {
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  const State::Document& document = state_->document(which, now);
  if (!document.text) return {StoredDocument::Status::absent, {}, document.revision, {}};
  return {StoredDocument::Status::found, *document.text, document.revision, {}};
}

FleetState::DocumentReplace MemoryFleetState::replace_document(DocumentId which, const StoredDocument& seen,
                                                               const std::string& text,
                                                               std::chrono::nanoseconds keep_for) {
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  State::Document& document = state_->document(which, now);
  const bool present = seen.status == StoredDocument::Status::found;
  if (seen.revision != document.revision || present != document.text.has_value()) {
    return {DocumentReplace::Status::conflict, {}};
  }
  document.text = text;
  document.expires_at.reset();
  if (keep_for > std::chrono::nanoseconds::zero()) document.expires_at = now + keep_for;
  ++document.revision;
  return {DocumentReplace::Status::written, {}};
}

std::size_t MemoryFleetState::ledgers() const {
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  return state_->ledgers->size(now);
}

std::size_t MemoryFleetState::size() const {
  const auto now = state_->clock->steady_now();
  std::lock_guard guard(state_->mutex);
  state_->purge_expired(now);
  return state_->cursors.size();
}

}  // namespace fleetcron
