// Internal: delivers events to the ledger writer and the recorder (inline)
// and to observers (one background thread, bounded queue that drops and
// counts).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/support/bounded_worker.h"
#include "fleetcron/events.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

class EventBus {
 public:
  /// `ledger` (may be null) gets every event inline, before the recorder.
  EventBus(std::vector<std::shared_ptr<Observer>> observers, std::shared_ptr<Observer> recorder,
           std::shared_ptr<Observer> ledger, std::size_t capacity, Logger logger);
  ~EventBus();
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;

  /// False when nobody listens: callers can skip building events.
  [[nodiscard]] bool active() const noexcept {
    return recorder_ != nullptr || ledger_ != nullptr || !observers_.empty();
  }
  void publish(Event event);
  /// Delivers what is queued, then stops the observer thread. Idempotent.
  void flush_and_stop();
  [[nodiscard]] std::uint64_t dropped() const;

 private:
  void deliver(Observer& sink, const Event& event) const;
  void log(const std::string& message) const noexcept;
  /// On the observers' thread: the gap first, then the event.
  void deliver_to_observers(const Event& event, RefusedGap gap) const;
  /// On the observers' thread: ObserverDropEvent with the total dropped.
  void tell_gap(RefusedGap gap) const;

  std::vector<std::shared_ptr<Observer>> observers_;
  std::shared_ptr<Observer> recorder_;
  std::shared_ptr<Observer> ledger_;
  Logger logger_;
  std::unique_ptr<BoundedWorker<Event>> worker_;  // the observers' thread; none without observers
};

}  // namespace fleetcron::detail
