// The claim path as the scheduler hosts it: the ClaimHost adapter through
// which ClaimPath (claim_path.cpp) sees the scheduler, the reports of a
// skipped or cancelled fire, and the elector's report of a lost term.
#include <fmt/format.h>

#include "core/scheduler/scheduler_impl.h"

namespace fleetcron {

using detail::Entry;
using detail::Fire;

/// The scheduler as the claim path sees it: the registry's verdict, the
/// entries' catch-ups, the reports, events and log.
class Scheduler::Impl::ClaimHost final : public detail::ClaimPath::Host {
 public:
  explicit ClaimHost(Impl& impl) : impl_(impl) {}
  std::string settings_refusal() override { return impl_.settings_refusal(); }
  std::string catch_up_pending(const Fire& fire) override { return impl_.catch_up_pending(fire); }
  void note_unled(const Fire& fire) override { impl_.note_unled(fire); }
  void report_skip(const Fire& fire, SkipReason reason, std::string error) override {
    impl_.report_skip(fire, reason, std::move(error));
  }
  void report_cancel(const Fire& fire, std::string cause, CancelReason reason) override {
    impl_.report_cancel(fire, std::move(cause), reason);
  }
  void publish(Event event) override { impl_.publish(std::move(event)); }
  void log(LogLevel level, const std::string& message) override { impl_.log(level, message); }

 private:
  Impl& impl_;
};

std::unique_ptr<detail::ClaimPath> Scheduler::Impl::make_claim_path() {
  claim_host_ = std::make_shared<ClaimHost>(*this);
  return std::make_unique<detail::ClaimPath>(
      *claim_host_,
      detail::ClaimPath::Settings{options_.elector, options_.fleet.catch_up_beyond_dedup_window, options_.log_events},
      clock_, fitness_, runs_);
}

void Scheduler::Impl::report_skip(const Fire& fire, SkipReason reason, std::string error) {
  if (fire.overlap_held != nullptr) fire.overlap_held->release();
  std::string key = fire_key(fire.entry->identity.key, fire.scheduled_at);
  if (!error.empty() && options_.log_events) {
    log(LogLevel::warning, fmt::format("fire {} skipped ({}): {}", key, to_string(reason), error));
  }
  publish(SkippedFireEvent{Entry::ref(fire.entry), std::move(key), fire.scheduled_at, reason, std::move(error)});
}

void Scheduler::Impl::report_cancel(const Fire& fire, std::string cause, CancelReason reason) {
  publish(CancelledFireEvent{Entry::ref(fire.entry), fire.scheduled_at, std::move(cause), reason,
                             detail::ClaimPath::claimed(fire)});
}

void Scheduler::Impl::on_leadership_lost(std::uint64_t term) {
  log(LogLevel::warning, fmt::format("leadership of term {} lost", term));
  runs_.note_term_lost(term);
  if (options_.on_leadership_lost != LeadershipLossPolicy::cancel) return;
  runs_.request_stop_where([term](const detail::Run& run) { return run.leader_gated && run.term <= term; }, false);
}

}  // namespace fleetcron
