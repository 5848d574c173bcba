// The run queue and the workers: fires wait in one queue; a worker takes
// the front, with the fires due with it that share its claimer (a claim
// batch, decided in one round trip), and runs its own fire (run.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "core/scheduler/scheduler_impl.h"
#include "core/support/assert.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;
using detail::FireState;

namespace {

// Marks the threads that run jobs, so stop() called from a job does not
// wait for (or join) its own thread.
thread_local const void* current_worker_of = nullptr;

}  // namespace

bool detail::on_worker_of(const void* impl) { return current_worker_of == impl; }

bool Scheduler::Impl::enqueue(std::vector<Fire>& fires) {
  if (fires.empty()) return false;
  std::vector<Fire> rejected;
  std::size_t queued = 0, running = 0, added = 0;
  bool stopping = false;
  {
    std::lock_guard guard(queue_mutex_);
    stopping = queue_closed_;
    for (auto& fire : fires) {
      if (stopping || queue_.size() >= options_.limits.max_queued) {
        rejected.push_back(std::move(fire));
      } else {
        queue_.push_back(std::move(fire));
        ++added;
      }
    }
    queued = queue_.size();
    running = running_count_;
  }
  fires.clear();
  // One worker per new fire, not all of them: a woken worker takes a claim
  // batch, and waking every idle worker for each enqueue is a herd.
  for (std::size_t i = 0; i < std::min(added, workers_.size()); ++i) queue_cv_.notify_one();
  for (auto& fire : rejected) {
    drop_chain(fire, stopping);
    if (stopping) {
      report_cancel(fire, "scheduler stopped", CancelReason::scheduler_stopped);
    } else {
      if (options_.log_events) {
        log(LogLevel::warning, fmt::format("entry {} \"{}\": fire rejected, the run queue is full ({} fires)",
                                           fire.entry->identity.id, fire.entry->identity.name, options_.limits.max_queued));
      }
      publish(RejectedFireEvent{Entry::ref(fire.entry), fire.scheduled_at, fire.manual()});
    }
    fires.push_back(std::move(fire));  // callers learn what did not fit
  }
  if (events_.active()) publish(QueueDepthEvent{queued, running});
  return stopping;
}

void Scheduler::Impl::drop_chain(Fire& fire, bool stopping) {
  if (!fire.chain) return;
  for (const Fire& later : *fire.chain) {
    if (stopping) {
      report_cancel(later, "scheduler stopped", CancelReason::scheduler_stopped);
    } else {
      publish(RejectedFireEvent{Entry::ref(later.entry), later.scheduled_at, false});
    }
  }
  fire.chain.reset();
}

bool Scheduler::Impl::can_take_locked() const {
  if (queue_.empty()) return false;
  // A granted fire brings the worker reserved for it; any other needs one
  // that no claim batch has reserved.
  return queue_.front().reserved || committed_ < workers_.size();
}

void Scheduler::Impl::worker_main(detail::WorkerSlot& slot) {
  current_worker_of = this;
  std::vector<Fire> batch;
  std::unique_lock lock(queue_mutex_);
  while (true) {
    // A worker holding a claim batch will put fires back: wait for them.
    queue_cv_.wait(lock, [this] { return (queue_closed_ && held_ == 0 && queue_.empty()) || can_take_locked(); });
    if (queue_.empty()) return;  // told to exit and nothing left (drain) or queue cleared (stop)
    Fire fire = queue_.pop_front();
    FLEETCRON_ASSERT(!fire.reserved || fire.state == FireState::granted);  // only a claim batch reserves
    ++running_count_;
    if (!fire.reserved) ++committed_;  // this worker; a granted fire's reservation passes to it
    fire.reserved = false;
    FLEETCRON_ASSERT(running_count_ <= workers_.size() && committed_ <= workers_.size());
    if (batchable(fire) && staleness_now(fire).empty()) take_batch(fire, batch);
    held_ += batch.size();
    lock.unlock();
    // Fires due together share one claim round trip: this worker runs
    // its own, the others go back to the front of the queue, granted.
    const bool runs = batch.empty() || decide_batch(fire, batch);
    if (runs) execute(fire, slot);
    lock.lock();
    FLEETCRON_ASSERT(running_count_ > 0 && (!runs || committed_ > 0));
    if (runs) --committed_;
    --running_count_;
    if (!queue_.empty()) queue_cv_.notify_one();  // a fire may have waited for a free worker
    idle_cv_.notify_all();
  }
}

bool Scheduler::Impl::batchable(const Fire& fire) {
  return fire.entry->batchable && !fire.manual() && fire.state == FireState::queued;
}

void Scheduler::Impl::take_batch(const Fire& first, std::vector<Fire>& batch) {
  // Only the front run of the queue: fires due at one instant are queued
  // together, and taking from the middle would cost a scan per worker.
  // Only as many as there are workers neither busy nor reserved by another
  // batch, and each taken fire reserves one (committed_): a claimed fire
  // must start at once, not wait in the queue behind jobs, where its claim
  // could expire, or be lost for the whole fleet if this process stops.
  const std::size_t free_workers = workers_.size() - std::min(workers_.size(), committed_);
  const std::size_t limit = std::min(claim_batch_limit - 1, free_workers);
  // A fire already too old to claim is left to a worker of its own, which
  // skips it at once: it must not hold a reserved worker.
  while (!queue_.empty() && batch.size() < limit) {
    Fire& next = queue_.front();
    if (!batchable(next) || next.entry->settings->claimer != first.entry->settings->claimer ||
        !staleness_now(next).empty()) {
      break;
    }
    batch.push_back(queue_.pop_front());
  }
  committed_ += batch.size();
  FLEETCRON_ASSERT(committed_ <= workers_.size());  // every fire the batch claims has a worker to start on
}

bool Scheduler::Impl::decide_batch(Fire& fire, std::vector<Fire>& batch) {
  const std::size_t taken = batch.size();
  batch.insert(batch.begin(), std::move(fire));
  // The fires still wanted keep a reserved worker each, except the first,
  // which this worker runs; the other reservations are given back at once
  // (before the round trip too: the workers they hold could run other fires).
  std::size_t reserved = taken;
  const auto release_unwanted = [&] {
    const auto wanted = static_cast<std::size_t>(std::count_if(
        batch.begin(), batch.end(), [](const Fire& f) { return f.state != FireState::dropped; }));
    const std::size_t needed = wanted == 0 ? 0 : wanted - 1;
    FLEETCRON_ASSERT(needed <= reserved);  // a fire dropped never comes back
    release_reservations(reserved - needed);
    reserved = needed;
  };
  // One election for the whole batch: the fires are due together, and a
  // round trip per fire would multiply an outage's timeouts.
  screen(batch, elect());
  release_unwanted();
  claim(batch);
  advance_cursors(batch);
  release_unwanted();
  std::erase_if(batch, [](const Fire& f) { return f.state == FireState::dropped; });
  const bool runs = !batch.empty();
  if (runs) {
    fire = std::move(batch.front());
    batch.erase(batch.begin());
  }
  for (auto& granted : batch) granted.reserved = true;
  {
    std::lock_guard guard(queue_mutex_);
    FLEETCRON_ASSERT(held_ >= taken && (runs || committed_ > 0));
    held_ -= taken;  // back in the queue, or dropped (their reservations are released)
    if (!runs) --committed_;
    queue_.push_front(batch);
  }
  queue_cv_.notify_all();
  batch.clear();
  return runs;
}

void Scheduler::Impl::release_reservations(std::size_t count) {
  if (count == 0) return;
  {
    std::lock_guard guard(queue_mutex_);
    FLEETCRON_ASSERT(committed_ >= count);
    committed_ -= count;
  }
  queue_cv_.notify_all();  // the freed workers may take other fires
}

}  // namespace fleetcron
