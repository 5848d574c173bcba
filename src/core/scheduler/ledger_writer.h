// Internal: writes the run ledger off the scheduling path (docs/fleet-state.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "fleetcron/clock.h"
#include "fleetcron/events.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

/// The one writer of the run ledger: turns the scheduler's events into
/// ledger records (ledger_records() — a lost run and an expired trigger
/// too: every record is derived from an event) and writes them from its
/// own thread, up to `batch` per record_fires() call,
/// from a queue of `capacity` records. The writer lets records gather for
/// `gather_window` (on the machine's steady clock) after it finds the
/// queue no longer empty, so that the records of runs ending together
/// share one call. A record finding the queue full is
/// dropped and counted; a failed batch is tried again after 1 s, doubling
/// to 30 s, and logged each time. stop() tries what is queued, each batch
/// twice, and logs what it could not write.
///
/// On a store whose acknowledged writes a concurrent compare-and-swap may
/// undo (FleetState::may_lose_concurrent_updates(): a NATS cluster), each
/// written record is read back `verify_delay` later (and once more at
/// stop()) and written again if its fire's entry lacks it, up to
/// `max_rewrites` times; a record the ledger's retention let go is not
/// missing. At most `capacity` records wait for their read-back.
class LedgerWriter final : public Observer {
 public:
  static constexpr std::size_t batch = 256;
  static constexpr std::chrono::milliseconds verify_delay{500};
  static constexpr int max_rewrites = 3;
  /// A `running` record is held this long after it is queued, so a run
  /// shorter than this writes its outcome alone (one write, not two); a
  /// record of the same fire that outranks it (its outcome) replaces it.
  static constexpr std::chrono::seconds running_record_delay{1};

  /// `default_retention`: the bounds of a record of a job no entry here
  /// ever tracked (a lost run of a job only the dead replica ran); a key
  /// stays tracked after its entry is removed (track()), with its bounds.
  LedgerWriter(std::shared_ptr<FleetState> state, std::string replica_id, LedgerRetention default_retention,
               std::size_t capacity, std::shared_ptr<Clock> clock, Logger logger,
               std::chrono::nanoseconds gather_window = std::chrono::nanoseconds::zero());
  ~LedgerWriter() override;
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  /// Records the fires of the entry with this key, with these bounds. A
  /// key stays tracked after its entry is removed (its last events, the
  /// cancellations, are recorded too), so the map holds every key added.
  void track(const std::string& key, const LedgerRetention& retention, bool coordinated);
  /// Inline, on the thread that published the event: cheap, never blocks
  /// on the store.
  void on_event(const Event& event) override;
  /// Queues records as on_event() does its own: a full queue drops (and
  /// counts) them. The scheduler writes through on_event() alone; a test
  /// of the store's races writes records directly.
  void enqueue(std::vector<LedgerWrite> writes);
  /// From here on, a `running` record also waits until runs_listed()
  /// reports a written announcement whose read of the runs came after the
  /// record was queued (`marks` counts those reads), so a runner killed
  /// before its run was listed leaves no record its loss could never
  /// replace.
  void hold_running_until_listed(const std::atomic<std::uint64_t>& marks);
  /// An announcement whose read of the runs had `mark` was written.
  void runs_listed(std::uint64_t mark);
  /// Writes what is queued (each batch twice at most), then ends the thread. Idempotent.
  void stop();

  [[nodiscard]] std::uint64_t written() const;
  [[nodiscard]] std::uint64_t dropped() const;
  /// Records written and not read back yet.
  [[nodiscard]] std::size_t unverified() const;
  /// Records written again because the read-back found them missing.
  [[nodiscard]] std::uint64_t rewritten() const;

 private:
  struct Tracked {
    LedgerRetention retention;
    bool coordinated = false;
  };
  struct Held {
    std::uint64_t mark = 0;  // marks_ when queued
    Clock::SteadyTime queued_at{};
    LedgerWrite write;
    bool superseded = false;  // its outcome came: not written
  };
  struct Unverified {
    LedgerWrite write;
    Clock::SteadyTime due;
    int rewrites = 0;
  };

  /// The bounds of the event's records; nullopt: it is not recorded.
  [[nodiscard]] std::optional<Tracked> tracked_for(const Event& event) const;
  void run();
  /// Writes `writes`; false if the store failed (the error is logged).
  /// Those written wait for their read-back when the store needs one.
  bool write(std::vector<LedgerWrite>& writes);
  /// Waits (mutex_ held) until there is work: queued or pending records,
  /// a read-back due, or stop().
  void wait_for_work(std::unique_lock<std::mutex>& lock, const std::vector<LedgerWrite>& pending);
  /// Waits (mutex_ held) up to gather_window_ for more records, while the
  /// queue holds less than a batch and stop() is not called.
  void gather(std::unique_lock<std::mutex>& lock);
  /// Holds a `running` record (mutex_ held).
  void hold_locked(LedgerWrite write);
  /// Whether `write` outranks a held record of its fire, which is then
  /// dropped (mutex_ held).
  bool supersedes_held_locked(const LedgerWrite& write);
  /// Queues the held records whose time and listing came, in order;
  /// true if there were some (mutex_ held).
  bool release_held_locked(Clock::SteadyTime now);
  /// When the front held record is due, if only time holds it.
  [[nodiscard]] std::optional<Clock::SteadyTime> held_due_locked() const;
  /// Reads back the records whose read-back is due (every one when `all`)
  /// and appends those missing to `pending`.
  void verify(std::vector<LedgerWrite>& pending, bool all);
  /// Ends a read-back pass whose read failed (`error` not empty): `unread`
  /// is read back after a backoff (1 s doubling to 30 s), or given up when
  /// stopping (`all`). An empty `error` resets the backoff.
  void read_back_failed(std::deque<Unverified>& unread, const std::string& error, bool all);
  /// stop()'s part: writes what is left, then the last read-back.
  void finish(std::vector<LedgerWrite>& pending);
  /// Writes `pending` by batches, each tried twice; false (logged) if some
  /// could not be written.
  bool write_all(std::vector<LedgerWrite>& pending);
  /// Whether `ledger` (a job's records, newest first) holds `record` or a
  /// record of its fire that outranks it, or let it go by its retention.
  static bool holds(const std::vector<FireRecord>& ledger, const LedgerWrite& write);
  void log(LogLevel level, const std::string& message) const noexcept;

  std::shared_ptr<FleetState> state_;
  std::string replica_id_;
  LedgerRetention default_retention_;
  std::size_t capacity_;
  std::shared_ptr<Clock> clock_;
  Logger logger_;
  std::chrono::nanoseconds gather_window_;

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable cv_;
  std::unordered_map<std::string, Tracked> tracked_;
  std::deque<LedgerWrite> queue_;
  // Running records held running_record_delay, and until the registry
  // lists their run (runs_listed()) when marks_ is set, in the order queued.
  const std::atomic<std::uint64_t>* marks_ = nullptr;  // null: no listing awaited
  std::uint64_t listed_mark_ = 0;                      // the highest runs_listed() reported
  std::deque<Held> held_;
  std::size_t held_live_ = 0;     // held_'s records not superseded: they count against capacity_
  std::uint64_t held_front_ = 0;  // the sequence number of held_.front()
  std::unordered_map<std::string, std::uint64_t> held_by_fire_;  // fire key → sequence number in held_
  bool stopping_ = false;
  bool closed_ = false;  // the thread took its last records
  std::uint64_t written_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t dropped_unlogged_ = 0;
  bool verifies_ = false;              // set once by the thread: the store needs read-backs
  std::deque<Unverified> unverified_;  // by due time
  std::uint64_t rewritten_ = 0;
  // Not guarded by mutex_: the writer thread's alone.
  std::unordered_map<std::string, int> rewrites_;  // fire key → times written again
  std::chrono::nanoseconds read_back_retry_{std::chrono::seconds{1}};
  std::thread thread_;
};

}  // namespace fleetcron::detail
