// The workers: each takes from the run queue (run_queue.cpp) the front
// fire, with the fires due with it that share its claimer (a claim batch,
// decided here in one round trip), and runs its own fire (run.cpp).
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
  const detail::RunQueue::Pushed pushed = run_queue_.push(fires);  // `fires` keeps what did not fit
  for (auto& fire : fires) {
    drop_chain(fire, pushed.closed);
    if (pushed.closed) {
      report_cancel(fire, "scheduler stopped", CancelReason::scheduler_stopped);
    } else {
      if (options_.log_events) {
        log(LogLevel::warning, fmt::format("entry {} \"{}\": fire rejected, the run queue is full ({} fires)",
                                           fire.entry->identity.id, fire.entry->identity.name,
                                           options_.limits.max_queued));
      }
      publish(RejectedFireEvent{Entry::ref(fire.entry), fire.scheduled_at, fire.manual()});
    }
  }
  if (events_.active()) publish(QueueDepthEvent{pushed.queued, pushed.running});
  return pushed.closed;
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

void Scheduler::Impl::worker_main(detail::WorkerSlot& slot) {
  current_worker_of = this;
  std::vector<Fire> batch, looked;
  Fire fire;
  while (run_queue_.take(fire, batch, looked)) {
    // Fires due together share one claim round trip: this worker runs
    // its own, the others go back to the front of the queue, granted.
    const bool runs = (batch.empty() && looked.empty()) || decide_batch(fire, batch, looked);
    if (runs) execute(fire, slot);
    fire = Fire{};  // drop its references before waiting for the next
    run_queue_.done(runs);
  }
}

bool Scheduler::Impl::batchable(const Fire& fire) {
  return fire.entry->batchable && !fire.manual() && fire.state == FireState::queued;
}

detail::RunQueue::BatchRule Scheduler::Impl::batch_rule() {
  // A fire already too old to claim is left to a worker of its own, which
  // skips it at once: it must not hold a reserved worker.
  return detail::RunQueue::BatchRule{
      [this](const Fire& first) { return batchable(first) && claims_->staleness_now(first).empty(); },
      [this](const Fire& first, const Fire& next) {
        return batchable(next) && next.entry->settings->claimer == first.entry->settings->claimer &&
               claims_->staleness_now(next).empty();
      },
      claim_batch_limit,
      [](const Fire& first) { return first.entry->settings->claimer->tells_already_claimed(); }};
}

void Scheduler::Impl::skip_busy_here(std::vector<Fire>& batch) {
  // A look, not an entry (the worker that runs the fire enters after the
  // claim): a replica whose previous run of the job still goes leaves the
  // fire to the others, unclaimed, as a fire decided alone does. Its run
  // may be unlisted in the registry already, ending: another replica then
  // runs the fire, where this one would have claimed it and skipped it.
  for (Fire& fire : batch) {
    if (fire.state == FireState::dropped || !fire.entry->overlap || fire.catch_up()) continue;  // catch-up: after
    {
      std::lock_guard guard(fire.entry->overlap->mutex);
      if (fire.entry->overlap->active == 0) continue;
    }
    report_skip(fire, SkipReason::overlap, "the previous run is still going");
    fire.state = FireState::dropped;
  }
}

bool Scheduler::Impl::decide_batch(Fire& fire, std::vector<Fire>& batch, std::vector<Fire>& looked) {
  const std::size_t taken = batch.size() + looked.size();
  std::size_t reserved = batch.size();  // looked fires reserve no worker
  batch.insert(batch.begin(), std::move(fire));
  // The fires still wanted keep a reserved worker each, except the first,
  // which this worker runs; the other reservations are given back at once
  // (before the round trip too: the workers they hold could run other fires).
  const auto release_unwanted = [&] {
    const auto wanted = static_cast<std::size_t>(std::count_if(
        batch.begin(), batch.end(), [](const Fire& f) { return f.state != FireState::dropped; }));
    const std::size_t needed = wanted == 0 ? 0 : wanted - 1;
    FLEETCRON_ASSERT(needed <= reserved);  // a fire dropped never comes back
    run_queue_.release(reserved - needed);
    reserved = needed;
  };
  // One election for the whole batch: the fires are due together, and a
  // round trip per fire would multiply an outage's timeouts.
  claims_->screen(batch, claims_->elect());
  skip_busy_here(batch);
  release_unwanted();
  claims_->claim(batch);
  advance_cursors(batch);
  release_unwanted();
  // The fires queued behind that no free worker could take: those another
  // replica claimed meanwhile are dropped now, not claimed one by one.
  claims_->drop_claimed_elsewhere(looked);
  const auto dropped = [](const Fire& f) { return f.state == FireState::dropped; };
  std::erase_if(looked, dropped);
  std::erase_if(batch, dropped);
  const bool runs = !batch.empty();
  if (runs) {
    fire = std::move(batch.front());
    batch.erase(batch.begin());
  }
  run_queue_.put_back(batch, looked, taken, runs);  // the granted ones, each with its reserved worker
  return runs;
}

}  // namespace fleetcron
