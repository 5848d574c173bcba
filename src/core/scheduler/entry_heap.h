// Internal: the loop's min-heap of the entries' next instants, with its
// stale items (of entries updated, paused or removed since) and when they
// are dropped. Not locked: the scheduler's mutex_ guards it with the entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/scheduler/entry.h"
#include "fleetcron/events.h"

namespace fleetcron::detail {

struct HeapItem {
  Instant at;
  std::uint64_t generation;
  std::shared_ptr<Entry> entry;
  /// Stale: its entry moved on (updated, paused, resumed, removed) since.
  [[nodiscard]] bool stale() const noexcept;
  // std::push_heap builds a max-heap: "greater" puts the earliest on top.
  friend bool operator<(const HeapItem& a, const HeapItem& b) { return a.at > b.at; }
};

class EntryHeap {
 public:
  /// Adds the entry at its next instant, unless it has none or is paused;
  /// a ScheduledEvent for it into `events` when not null.
  void push(std::shared_ptr<Entry> entry, std::vector<Event>* events);
  /// Makes the entry's item (if it has one) stale, before the entry's next
  /// instant, schedule, pause or removal changes: moves its generation.
  void retire(Entry& entry);
  /// Rebuilds the heap without its stale items once they outnumber the
  /// live ones (a removed entry's job and captures live until then).
  void compact();
  /// The earliest live item if it is due at `now`, dropping the stale
  /// items before it; null if none is due.
  [[nodiscard]] HeapItem* due(Instant now);
  /// After a fire of the top item's entry: moves the item to the entry's
  /// next instant (a ScheduledEvent into `events` when not null), or pops
  /// it when the entry has none or is paused.
  void reschedule_top(std::vector<Event>* events);
  /// The earliest item's instant (perhaps a stale one's); nullopt if empty.
  [[nodiscard]] std::optional<Instant> earliest() const;
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] std::size_t stale_count() const noexcept { return stale_; }

 private:
  void pop();
  std::vector<HeapItem> items_;
  std::size_t stale_ = 0;  // how many items are stale (counted by retire(), dropped by due() and compact())
};

}  // namespace fleetcron::detail
