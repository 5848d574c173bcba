// The loop's min-heap of the entries' next instants.
#include "core/scheduler/entry_heap.h"

#include <algorithm>
#include <utility>

#include "core/support/assert.h"

namespace fleetcron::detail {

namespace {
// Whether the entry has a live item in the heap.
bool has_item(const Entry& entry) {
  return entry.next != Entry::no_instant && !entry.paused.load(std::memory_order_relaxed);
}
}  // namespace

bool HeapItem::stale() const noexcept {
  return generation != entry->generation || entry->removed.load(std::memory_order_relaxed) ||
         entry->paused.load(std::memory_order_relaxed);
}

void EntryHeap::push(std::shared_ptr<Entry> entry, std::vector<Event>* events) {
  if (!has_item(*entry)) return;
  if (events) events->push_back(ScheduledEvent{Entry::ref(entry), entry->next});
  const Instant at = entry->next;
  const std::uint64_t generation = entry->generation;
  items_.push_back(HeapItem{at, generation, std::move(entry)});
  std::push_heap(items_.begin(), items_.end());
}

void EntryHeap::retire(Entry& entry) {
  if (has_item(entry)) ++stale_;
  ++entry.generation;
}

void EntryHeap::compact() {
  if (stale_ == 0 || stale_ <= items_.size() / 2) return;
  std::erase_if(items_, [](const HeapItem& item) { return item.stale(); });
  std::make_heap(items_.begin(), items_.end());
  stale_ = 0;
}

HeapItem* EntryHeap::due(Instant now) {
  while (!items_.empty() && items_.front().at <= now) {
    if (!items_.front().stale()) return &items_.front();
    pop();
    if (stale_ > 0) --stale_;
  }
  return nullptr;
}

void EntryHeap::pop() {
  std::pop_heap(items_.begin(), items_.end());
  items_.pop_back();
}

void EntryHeap::reschedule_top(std::vector<Event>* events) {
  FLEETCRON_ASSERT(!items_.empty());
  HeapItem& top = items_.front();
  const Entry& entry = *top.entry;
  if (!has_item(entry)) return pop();
  if (events) events->push_back(ScheduledEvent{Entry::ref(top.entry), entry.next});
  // Replace the top and sift it down: half the work of a pop and a push.
  top.at = entry.next;
  top.generation = entry.generation;
  HeapItem item = std::move(top);
  std::size_t hole = 0;
  const std::size_t size = items_.size();
  for (std::size_t child = 1; child < size; child = 2 * hole + 1) {
    if (child + 1 < size && items_[child + 1].at < items_[child].at) ++child;
    if (!(items_[child].at < item.at)) break;
    items_[hole] = std::move(items_[child]);
    hole = child;
  }
  items_[hole] = std::move(item);
}

std::optional<Instant> EntryHeap::earliest() const {
  if (items_.empty()) return std::nullopt;
  return items_.front().at;
}

}  // namespace fleetcron::detail
