#include "core/scheduler/ledger_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/scheduler/ledger_records.h"
#include "fleetcron/duration.h"
#include "fleetcron/fire_record.h"

namespace fleetcron::detail {

namespace {

constexpr std::chrono::seconds first_retry{1};
constexpr std::chrono::seconds last_retry{30};

// Drops from `writes` each record that a later one of the same fire
// outranks (a run's `running` record queued with its outcome): the store
// would keep the outranking one anyway, so one write gives the same
// ledger. Of equal ranks the first stays, as in the store. Returns how
// many it dropped.
std::size_t drop_superseded(std::vector<LedgerWrite>& writes) {
  std::unordered_map<std::string_view, std::size_t> best;  // fire key -> index of its highest record
  std::vector<bool> superseded(writes.size(), false);
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const auto [it, first] = best.try_emplace(writes[i].record.fire_key, i);
    if (first) continue;
    const bool outranks = ledger_rank(writes[i].record) > ledger_rank(writes[it->second].record);
    superseded[outranks ? it->second : i] = true;
    if (outranks) it->second = i;
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < writes.size(); ++i) {
    if (superseded[i]) continue;
    if (kept != i) writes[kept] = std::move(writes[i]);
    ++kept;
  }
  const std::size_t dropped = writes.size() - kept;
  writes.resize(kept);
  return dropped;
}

}  // namespace

LedgerWriter::LedgerWriter(std::shared_ptr<FleetState> state, std::string replica_id, LedgerRetention default_retention,
                           std::size_t capacity, std::shared_ptr<Clock> clock, Logger logger,
                           std::chrono::nanoseconds gather_window)
    : state_(std::move(state)),
      replica_id_(std::move(replica_id)),
      default_retention_(default_retention),
      capacity_(capacity),
      clock_(std::move(clock)),
      logger_(std::move(logger)),
      gather_window_(gather_window) {
  thread_ = std::thread([this] { run(); });
}

LedgerWriter::~LedgerWriter() { stop(); }

void LedgerWriter::track(const std::string& key, const LedgerRetention& retention, bool coordinated) {
  std::lock_guard guard(mutex_);
  tracked_[key] = Tracked{retention, coordinated};
}

std::optional<LedgerWriter::Tracked> LedgerWriter::tracked_for(const Event& event) const {
  // A fire of an entry here: recorded if its key is tracked. A fire the
  // scheduler reports for the fleet (a lost run, an expired trigger) may
  // be of a job this replica does not run: the default retention then.
  return std::visit(
      [this](const auto& e) -> std::optional<Tracked> {
        std::lock_guard guard(mutex_);
        if constexpr (requires { e.entry; }) {
          if (!e.entry || e.entry->key.empty()) return std::nullopt;
          const auto it = tracked_.find(e.entry->key);
          if (it == tracked_.end()) return std::nullopt;  // an entry not recorded
          return it->second;
        } else if constexpr (requires { e.job_key; }) {
          const auto it = tracked_.find(e.job_key);
          return it != tracked_.end() ? it->second : Tracked{default_retention_, true};
        } else {
          return std::nullopt;
        }
      },
      event);
}

void LedgerWriter::on_event(const Event& event) {
  const std::optional<Tracked> found = tracked_for(event);
  if (!found) return;
  const Tracked& tracked = *found;
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
      if (closed_ || queue_.size() + held_live_ >= capacity_) {
        ++dropped_;
        ++dropped_unlogged_;
        continue;
      }
      if (write.record.fate == FireFate::running) {
        hold_locked(std::move(write));
        continue;
      }
      if (supersedes_held_locked(write)) ++written_;  // counted as written: its successor is
      queue_.push_back(std::move(write));
    }
  }
  cv_.notify_one();
}

void LedgerWriter::hold_locked(LedgerWrite write) {
  const std::uint64_t sequence = held_front_ + held_.size();
  const auto [it, added] = held_by_fire_.try_emplace(write.record.fire_key, sequence);
  if (!added) {  // the fire's running record again: the first stays, as in the store
    ++written_;
    return;
  }
  held_.push_back(Held{marks_ != nullptr ? marks_->load() : 0, clock_->steady_now(), std::move(write)});
  ++held_live_;
}

bool LedgerWriter::supersedes_held_locked(const LedgerWrite& write) {
  const auto it = held_by_fire_.find(write.record.fire_key);
  if (it == held_by_fire_.end()) return false;
  Held& held = held_[it->second - held_front_];
  if (ledger_rank(write.record) <= ledger_rank(held.write.record)) return false;
  held.superseded = true;
  --held_live_;  // its place in held_ stays until the front reaches it, counting for nothing
  held_by_fire_.erase(it);
  return true;
}

bool LedgerWriter::release_held_locked(Clock::SteadyTime now) {
  bool released = false;
  while (!held_.empty()) {
    Held& front = held_.front();
    if (!front.superseded) {
      if (marks_ != nullptr && front.mark >= listed_mark_) break;  // not listed yet
      if (now < front.queued_at + running_record_delay) break;
      held_by_fire_.erase(front.write.record.fire_key);
      queue_.push_back(std::move(front.write));
      --held_live_;
      released = true;
    }
    held_.pop_front();
    ++held_front_;
  }
  return released;
}

std::optional<Clock::SteadyTime> LedgerWriter::held_due_locked() const {
  for (const Held& held : held_) {
    if (held.superseded) continue;
    if (marks_ != nullptr && held.mark >= listed_mark_) return std::nullopt;  // runs_listed() wakes us
    return held.queued_at + running_record_delay;
  }
  return std::nullopt;
}

void LedgerWriter::hold_running_until_listed(const std::atomic<std::uint64_t>& marks) {
  std::lock_guard guard(mutex_);
  marks_ = &marks;
}

void LedgerWriter::runs_listed(std::uint64_t mark) {
  {
    std::lock_guard guard(mutex_);
    if (mark <= listed_mark_) return;
    listed_mark_ = mark;
    if (held_.empty()) return;
  }
  cv_.notify_one();  // the writer releases them, or waits for their time
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
  const auto due = clock_->steady_now() + verify_delay;
  {
    std::lock_guard guard(mutex_);
    for (std::size_t i = 0; i < results.size() && i < writes.size(); ++i) {
      if (results[i].status == LedgerWriteResult::Status::error) {
        if (error.empty()) error = results[i].error;
        failed.push_back(std::move(writes[i]));
        continue;
      }
      const auto rewritten = rewrites_.find(writes[i].record.fire_key);
      if (rewritten == rewrites_.end()) ++written_;  // a record written again counts once
      const bool was_written = results[i].status == LedgerWriteResult::Status::written;
      if (verifies_ && was_written && unverified_.size() < capacity_) {
        const int times = rewritten == rewrites_.end() ? 0 : rewritten->second;
        unverified_.push_back(Unverified{std::move(writes[i]), due, times});
      } else if (rewritten != rewrites_.end()) {
        rewrites_.erase(rewritten);  // outranked or let go meanwhile: nothing to read back
      }
    }
  }
  writes = std::move(failed);
  if (writes.empty()) return true;
  log(LogLevel::warning, fmt::format("ledger: {} records not written yet: {}", writes.size(), error));
  return false;
}

void LedgerWriter::wait_for_work(std::unique_lock<std::mutex>& lock, const std::vector<LedgerWrite>& pending) {
  while (!stopping_ && queue_.empty() && pending.empty()) {
    const auto now = clock_->steady_now();
    if (release_held_locked(now)) continue;
    if (!unverified_.empty() && unverified_.front().due <= now) return;  // a read-back is due
    std::optional<Clock::SteadyTime> wake = held_due_locked();
    if (!unverified_.empty()) wake = std::min(wake.value_or(unverified_.front().due), unverified_.front().due);
    if (wake) {
      clock_->wait_until(cv_, lock, *wake);
    } else {
      cv_.wait(lock);
    }
  }
}

void LedgerWriter::gather(std::unique_lock<std::mutex>& lock) {
  if (gather_window_ <= std::chrono::nanoseconds::zero()) return;
  // The machine's steady clock, not clock_: a virtual clock that nobody
  // advances would hold the records for ever, and this wait decides nothing.
  const auto until = std::chrono::steady_clock::now() + gather_window_;
  cv_.wait_until(lock, until, [this] { return stopping_ || queue_.size() >= batch; });
}

bool LedgerWriter::holds(const std::vector<FireRecord>& ledger, const LedgerWrite& write) {
  const FireRecord& record = write.record;
  for (const FireRecord& kept : ledger) {
    if (kept.fire_key == record.fire_key) return ledger_rank(kept) >= ledger_rank(record);
  }
  if (ledger.empty()) return false;
  // Let go by the retention: beyond keep_count, or keep_for before the newest.
  if (ledger.size() >= write.retention.keep_count && record.scheduled_at <= ledger.back().scheduled_at) return true;
  return record.scheduled_at < ledger.front().scheduled_at - write.retention.keep_for;
}

void LedgerWriter::verify(std::vector<LedgerWrite>& pending, bool all) {
  std::deque<Unverified> due;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock_->steady_now();
    while (!unverified_.empty() && (all || unverified_.front().due <= now)) {
      due.push_back(std::move(unverified_.front()));
      unverified_.pop_front();
    }
  }
  std::unordered_map<std::string, std::vector<FireRecord>> ledgers;  // job key → its records, read once
  std::size_t missing = 0, given_up = 0;
  std::string failed;  // a read that failed ends the pass
  while (!due.empty() && failed.empty()) {
    Unverified& item = due.front();
    const std::string& job = item.write.record.job_key;
    auto it = ledgers.find(job);
    if (it == ledgers.end()) {
      LedgerRead read = state_->read_fires(job, LedgerRetention::max_keep_count);
      if (read.status != LedgerRead::Status::found) {
        failed = read.error;
        break;
      }
      it = ledgers.emplace(job, std::move(read.records)).first;
    }
    const std::string& fire_key = item.write.record.fire_key;
    if (holds(it->second, item.write)) {
      rewrites_.erase(fire_key);
    } else if (item.rewrites >= max_rewrites) {
      rewrites_.erase(fire_key);
      ++given_up;
    } else {
      rewrites_[fire_key] = item.rewrites + 1;
      pending.push_back(std::move(item.write));
      ++missing;
    }
    due.pop_front();
  }
  read_back_failed(due, failed, all);
  {
    std::lock_guard guard(mutex_);
    rewritten_ += missing;
  }
  if (missing != 0) {
    log(LogLevel::warning, fmt::format("ledger: {} records written here were missing when read back (a concurrent "
                                       "write of their job's ledger undid them): written again",
                                       missing));
  }
  if (given_up != 0) {
    log(LogLevel::error, fmt::format("ledger: {} records still missing after {} rewrites: not written again",
                                     given_up, max_rewrites));
  }
}

void LedgerWriter::read_back_failed(std::deque<Unverified>& unread, const std::string& error, bool all) {
  if (error.empty()) {
    read_back_retry_ = first_retry;
    return;
  }
  const std::size_t count = unread.size();
  if (all) {
    for (const Unverified& item : unread) rewrites_.erase(item.write.record.fire_key);
    log(LogLevel::warning, fmt::format("ledger: stopped without reading back {} records: {}", count, error));
    return;
  }
  // Backing off as the writes do: never a read after read against a store that is down.
  const auto due = clock_->steady_now() + read_back_retry_;
  log(LogLevel::warning, fmt::format("ledger: reading back {} records failed, tried again in {}: {}", count,
                                     format_duration(read_back_retry_), error));
  read_back_retry_ = std::min<std::chrono::nanoseconds>(read_back_retry_ * 2, last_retry);
  std::lock_guard guard(mutex_);
  for (auto item = unread.rbegin(); item != unread.rend(); ++item) {  // ahead of the later ones, in order
    item->due = due;
    unverified_.push_front(std::move(*item));
  }
}

void LedgerWriter::run() {
  bool verifies = true;  // unknown: the safe side
  try {
    verifies = state_->may_lose_concurrent_updates();
  } catch (...) {
  }
  std::vector<LedgerWrite> pending;  // taken from the queue, not yet written
  auto retry_in = std::chrono::nanoseconds{first_retry};
  std::unique_lock lock(mutex_);
  verifies_ = verifies;
  while (true) {
    wait_for_work(lock, pending);
    if (pending.empty() && !queue_.empty()) gather(lock);  // not before a retry: that waited already
    if (stopping_) break;
    release_held_locked(clock_->steady_now());  // also when the queue never empties
    const std::uint64_t dropped_now = std::exchange(dropped_unlogged_, 0);
    const std::uint64_t dropped_total = dropped_;
    while (pending.size() < batch && !queue_.empty()) {
      pending.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    written_ += drop_superseded(pending);  // counted as written: their successor is
    lock.unlock();  // the logger may be slow: never under the lock on_event() takes
    if (dropped_now != 0) {
      log(LogLevel::warning, fmt::format("ledger: queue full ({} records): {} records dropped, {} in all", capacity_,
                                         dropped_now, dropped_total));
    }
    verify(pending, false);
    const bool ok = pending.empty() || write(pending);
    lock.lock();
    if (ok) {
      retry_in = first_retry;
      continue;
    }
    const auto until = clock_->steady_now() + retry_in;
    while (!stopping_ && clock_->steady_now() < until) clock_->wait_until(cv_, lock, until);
    retry_in = std::min<std::chrono::nanoseconds>(retry_in * 2, last_retry);
  }
  lock.unlock();
  finish(pending);
}

void LedgerWriter::finish(std::vector<LedgerWrite>& pending) {
  std::unique_lock lock(mutex_);
  for (Held& held : held_) {  // a clean stop: its runs ended first
    if (!held.superseded) queue_.push_back(std::move(held.write));
  }
  held_.clear();
  held_live_ = 0;
  held_by_fire_.clear();
  while (!queue_.empty()) {
    pending.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  closed_ = true;
  const std::uint64_t dropped = dropped_;
  lock.unlock();
  if (dropped != 0) log(LogLevel::warning, fmt::format("ledger: {} records dropped in all (queue full)", dropped));
  if (!write_all(pending) || !verifies_) return;
  // The last read-back: once every record written is due.
  lock.lock();
  const auto until = unverified_.empty() ? clock_->steady_now() : unverified_.back().due;
  while (clock_->steady_now() < until) clock_->wait_until(cv_, lock, until);
  lock.unlock();
  std::vector<LedgerWrite> missing;
  verify(missing, true);
  (void)write_all(missing);
}

bool LedgerWriter::write_all(std::vector<LedgerWrite>& pending) {
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
  return lost == 0;
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

std::size_t LedgerWriter::unverified() const {
  std::lock_guard guard(mutex_);
  return unverified_.size();
}

std::uint64_t LedgerWriter::rewritten() const {
  std::lock_guard guard(mutex_);
  return rewritten_;
}

void LedgerWriter::log(LogLevel level, const std::string& message) const noexcept {
  try {
    if (logger_) logger_(level, message);
  } catch (...) {
    // A failing log sink must not take the writer down.
  }
}

}  // namespace fleetcron::detail
