#include "core/scheduler/event_bus.h"

#include <exception>
#include <string>

namespace fleetcron::detail {

EventBus::EventBus(std::vector<std::shared_ptr<Observer>> observers, std::shared_ptr<Observer> recorder,
                   std::shared_ptr<Observer> ledger, std::size_t capacity, Logger logger)
    : observers_(std::move(observers)),
      recorder_(std::move(recorder)),
      ledger_(std::move(ledger)),
      logger_(std::move(logger)) {
  if (observers_.empty()) return;
  worker_ = std::make_unique<BoundedWorker<Event>>(
      capacity, [this](Event& event, RefusedGap gap, std::stop_token) { deliver_to_observers(event, gap); },
      [this](RefusedGap gap) { tell_gap(gap); });
}

EventBus::~EventBus() { flush_and_stop(); }

void EventBus::deliver(Observer& sink, const Event& event) const {
  try {
    sink.on_event(event);
  } catch (const std::exception& e) {
    log(std::string("event sink threw: ") + e.what());
  } catch (...) {
    log("event sink threw a non-standard exception");
  }
}

void EventBus::log(const std::string& message) const noexcept {
  try {
    if (logger_) logger_(LogLevel::error, message);
  } catch (...) {
    // A failing log sink must not take the process down.
  }
}

void EventBus::publish(Event event) {
  if (ledger_) deliver(*ledger_, event);
  if (recorder_) deliver(*recorder_, event);
  if (!worker_) return;
  std::uint64_t dropped_so_far = 0;
  if (worker_->push(event, &dropped_so_far) == BoundedWorker<Event>::Refusal::full && recorder_) {
    deliver(*recorder_, ObserverDropEvent{dropped_so_far});
  }
}

void EventBus::deliver_to_observers(const Event& event, RefusedGap gap) const {
  // Room again: the observers learn of the gap before what follows it.
  if (gap.since_previous != 0) tell_gap(gap);
  for (const auto& observer : observers_) deliver(*observer, event);
}

void EventBus::tell_gap(RefusedGap gap) const {
  for (const auto& observer : observers_) deliver(*observer, ObserverDropEvent{gap.total});
}

void EventBus::flush_and_stop() {
  if (worker_) (void)worker_->stop();
}

std::uint64_t EventBus::dropped() const { return worker_ ? worker_->refused() : 0; }

}  // namespace fleetcron::detail
