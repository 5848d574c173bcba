#include "core/scheduler/event_bus.h"

#include <exception>
#include <string>

namespace fleetcron::detail {

EventBus::EventBus(std::vector<std::shared_ptr<Observer>> observers, std::shared_ptr<Observer> recorder,
                   std::shared_ptr<Observer> ledger, std::size_t capacity, Logger logger)
    : observers_(std::move(observers)),
      recorder_(std::move(recorder)),
      ledger_(std::move(ledger)),
      capacity_(capacity),
      logger_(std::move(logger)) {
  if (!observers_.empty()) thread_ = std::thread([this] { run(); });
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
  if (observers_.empty()) return;
  std::uint64_t dropped_now = 0;
  {
    std::lock_guard guard(mutex_);
    if (stopping_) return;
    if (queue_.size() >= capacity_) {
      dropped_now = ++dropped_;
      drop_unreported_ = true;
    } else {
      // Room again: the observers learn of the gap before what follows it
      // (the report may take the queue one past its capacity).
      if (drop_unreported_) {
        queue_.push_back(ObserverDropEvent{dropped_});
        drop_unreported_ = false;
      }
      queue_.push_back(std::move(event));
    }
  }
  if (dropped_now != 0) {
    if (recorder_) deliver(*recorder_, ObserverDropEvent{dropped_now});
    return;
  }
  cv_.notify_one();
}

void EventBus::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything delivered
    Event event = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    for (const auto& observer : observers_) deliver(*observer, event);
    lock.lock();
  }
}

void EventBus::flush_and_stop() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::uint64_t EventBus::dropped() const {
  std::lock_guard guard(mutex_);
  return dropped_;
}

}  // namespace fleetcron::detail
