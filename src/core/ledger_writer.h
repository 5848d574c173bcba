// Internal: writes the run ledger off the scheduling path (docs/fleet-state.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "fleetcron/clock.h"
#include "fleetcron/events.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

/// Turns the scheduler's events into ledger records (ledger_record()) and
/// writes them from its own thread, up to `batch` per record_fires() call,
/// from a queue of `capacity` records. A record finding the queue full is
/// dropped and counted; a failed batch is tried again after 1 s, doubling
/// to 30 s, and logged each time. stop() tries what is queued, each batch
/// twice, and logs what it could not write.
class LedgerWriter final : public Observer {
 public:
  static constexpr std::size_t batch = 256;

  LedgerWriter(std::shared_ptr<FleetState> state, std::string replica_id, std::size_t capacity,
               std::shared_ptr<Clock> clock, Logger logger);
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
  /// Queues records made elsewhere (lost runs, expired triggers): written,
  /// tried again and dropped as the events' records are.
  void enqueue(std::vector<LedgerWrite> writes);
  /// Writes what is queued (each batch twice at most), then ends the thread. Idempotent.
  void stop();

  [[nodiscard]] std::uint64_t written() const;
  [[nodiscard]] std::uint64_t dropped() const;

 private:
  struct Tracked {
    LedgerRetention retention;
    bool coordinated = false;
  };

  void run();
  /// Writes `writes`; false if the store failed (the error is logged).
  bool write(std::vector<LedgerWrite>& writes);
  void log(LogLevel level, const std::string& message) const noexcept;

  std::shared_ptr<FleetState> state_;
  std::string replica_id_;
  std::size_t capacity_;
  std::shared_ptr<Clock> clock_;
  Logger logger_;

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable cv_;
  std::unordered_map<std::string, Tracked> tracked_;
  std::deque<LedgerWrite> queue_;
  bool stopping_ = false;
  bool closed_ = false;  // the thread took its last records
  std::uint64_t written_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t dropped_unlogged_ = 0;
  std::thread thread_;
};

}  // namespace fleetcron::detail
