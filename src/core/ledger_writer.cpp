#include "core/ledger_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/ledger_records.h"
#include "fleetcron/duration.h"

namespace fleetcron::detail {

namespace {

constexpr std::chrono::seconds first_retry{1};
constexpr std::chrono::seconds last_retry{30};

}  // namespace

LedgerWriter::LedgerWriter(std::shared_ptr<FleetState> state, std::string replica_id, std::size_t capacity,
                           std::shared_ptr<Clock> clock, Logger logger)
    : state_(std::move(state)),
      replica_id_(std::move(replica_id)),
      capacity_(capacity),
      clock_(std::move(clock)),
      logger_(std::move(logger)) {
  thread_ = std::thread([this] { run(); });
}

LedgerWriter::~LedgerWriter() { stop(); }

void LedgerWriter::track(const std::string& key, const LedgerRetention& retention, bool coordinated) {
  std::lock_guard guard(mutex_);
  tracked_[key] = Tracked{retention, coordinated};
}

void LedgerWriter::on_event(const Event& event) {
  const EntryRef* entry = std::visit(
      [](const auto& e) -> const EntryRef* {
        if constexpr (requires { e.entry; }) return &e.entry;
        return nullptr;
      },
      event);
  if (entry == nullptr || !*entry || (*entry)->key.empty()) return;
  Tracked tracked;
  {
    std::lock_guard guard(mutex_);
    const auto it = tracked_.find((*entry)->key);
    if (it == tracked_.end()) return;  // an entry not recorded
    tracked = it->second;
  }
  std::vector<FireRecord> records =
      ledger_records(event, replica_id_, tracked.coordinated, tracked.retention.keep_count);
  std::vector<LedgerWrite> writes;
  writes.reserve(records.size());
  for (FireRecord& record : records) writes.push_back(LedgerWrite{cut_fire_record(std::move(record)), tracked.retention});
  enqueue(std::move(writes));
}

void LedgerWriter::enqueue(std::vector<LedgerWrite> writes) {
  if (writes.empty()) return;
  {
    std::lock_guard guard(mutex_);
    for (LedgerWrite& write : writes) {
      if (closed_ || queue_.size() >= capacity_) {
        ++dropped_;
        ++dropped_unlogged_;
        continue;
      }
      queue_.push_back(std::move(write));
    }
  }
  cv_.notify_one();
}

bool LedgerWriter::write(std::vector<LedgerWrite>& writes) {
  std::vector<LedgerWriteResult> results;
  try {
    results = state_->record_fires(writes);
  } catch (const std::exception& e) {
    // A record the store refuses is a bug here, not an outage: drop it.
    log(LogLevel::error, fmt::format("ledger: {} records refused: {}", writes.size(), e.what()));
    writes.clear();
    return true;
  }
  std::vector<LedgerWrite> failed;
  std::string error;
  for (std::size_t i = 0; i < results.size() && i < writes.size(); ++i) {
    if (results[i].status != LedgerWriteResult::Status::error) continue;
    if (error.empty()) error = results[i].error;
    failed.push_back(std::move(writes[i]));
  }
  {
    std::lock_guard guard(mutex_);
    written_ += writes.size() - failed.size();
  }
  writes = std::move(failed);
  if (writes.empty()) return true;
  log(LogLevel::warning, fmt::format("ledger: {} records not written yet: {}", writes.size(), error));
  return false;
}

void LedgerWriter::run() {
  std::vector<LedgerWrite> pending;  // taken from the queue, not yet written
  auto retry_in = std::chrono::nanoseconds{first_retry};
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !pending.empty(); });
    if (stopping_) break;
    const std::uint64_t dropped_now = std::exchange(dropped_unlogged_, 0);
    const std::uint64_t dropped_total = dropped_;
    while (pending.size() < batch && !queue_.empty()) {
      pending.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();  // the logger may be slow: never under the lock on_event() takes
    if (dropped_now != 0) {
      log(LogLevel::warning, fmt::format("ledger: queue full ({} records): {} records dropped, {} in all", capacity_,
                                         dropped_now, dropped_total));
    }
    const bool ok = write(pending);
    lock.lock();
    if (ok) {
      retry_in = first_retry;
      continue;
    }
    const auto until = clock_->steady_now() + retry_in;
    while (!stopping_ && clock_->steady_now() < until) clock_->wait_until(cv_, lock, until);
    retry_in = std::min<std::chrono::nanoseconds>(retry_in * 2, last_retry);
  }
  // Stopping: everything left, once.
  while (!queue_.empty()) {
    pending.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  closed_ = true;
  const std::uint64_t dropped = dropped_;
  lock.unlock();
  if (dropped != 0) log(LogLevel::warning, fmt::format("ledger: {} records dropped in all (queue full)", dropped));
  std::size_t lost = 0;
  for (std::size_t first = 0; first < pending.size(); first += batch) {
    std::vector<LedgerWrite> chunk(std::make_move_iterator(pending.begin() + static_cast<std::ptrdiff_t>(first)),
                                   std::make_move_iterator(pending.begin() +
                                                           static_cast<std::ptrdiff_t>(std::min(first + batch, pending.size()))));
    // Tried twice: a request that failed once may pass (a lost answer, a
    // failover); a store that fails both would make each further try wait
    // out its timeouts too.
    if (!write(chunk) && !write(chunk)) {
      lost = chunk.size() + (pending.size() - std::min(first + batch, pending.size()));
      break;
    }
  }
  if (lost != 0) log(LogLevel::error, fmt::format("ledger: stopped with {} records not written", lost));
}

void LedgerWriter::stop() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::uint64_t LedgerWriter::written() const {
  std::lock_guard guard(mutex_);
  return written_;
}

std::uint64_t LedgerWriter::dropped() const {
  std::lock_guard guard(mutex_);
  return dropped_;
}

void LedgerWriter::log(LogLevel level, const std::string& message) const noexcept {
  try {
    if (logger_) logger_(level, message);
  } catch (...) {
    // A failing log sink must not take the writer down.
  }
}

}  // namespace fleetcron::detail
