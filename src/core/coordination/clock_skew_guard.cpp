// The claimers' clock-skew guard (include/fleetcron/backend/clock_skew_guard.h).
#include "fleetcron/backend/clock_skew_guard.h"

#include <fmt/format.h>

#include <mutex>
#include <stdexcept>

#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::backend {

class FLEETCRON_LOCAL ClockSkewGuard::Impl {
 public:
  std::string store;
  std::chrono::nanoseconds claim_ttl{0};
  std::chrono::nanoseconds max_skew{0};
  std::chrono::nanoseconds refresh{0};
  std::shared_ptr<Clock> clock;
  mutable std::mutex mutex;  // guards offset
  std::optional<ClockOffset> offset;
};

ClockSkewGuard::ClockSkewGuard(std::string_view options_name, std::string_view ttl_name, std::string store,
                               std::chrono::nanoseconds claim_ttl,
                               std::optional<std::chrono::nanoseconds> max_clock_skew,
                               std::chrono::nanoseconds skew_refresh_interval, std::shared_ptr<Clock> clock)
    : impl_(std::make_unique<Impl>()) {
  const auto skew = max_clock_skew.value_or(claim_ttl / 4);
  if (skew <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("{}.max_clock_skew: {} is not positive", options_name, format_duration(skew)));
  }
  if (skew >= claim_ttl - skew) {  // 2·skew ≥ TTL, without overflow
    throw std::invalid_argument(fmt::format(
        "{}.max_clock_skew: {} is not below {} / 2 ({}): two replicas at opposite ends of the guard could both claim "
        "a fire",
        options_name, format_duration(skew), ttl_name, format_duration(claim_ttl / 2)));
  }
  if (skew_refresh_interval < std::chrono::milliseconds{1} || skew_refresh_interval > std::chrono::hours{1}) {
    throw std::invalid_argument(fmt::format("{}.skew_refresh_interval: {} is out of range 1ms..1h", options_name,
                                            format_duration(skew_refresh_interval)));
  }
  impl_->store = std::move(store);
  impl_->claim_ttl = claim_ttl;
  impl_->max_skew = skew;
  impl_->refresh = skew_refresh_interval;
  impl_->clock = clock ? std::move(clock) : system_clock();
}

ClockSkewGuard::~ClockSkewGuard() = default;

std::chrono::nanoseconds ClockSkewGuard::max_clock_skew() const noexcept { return impl_->max_skew; }

std::chrono::nanoseconds ClockSkewGuard::dedup_window() const noexcept {
  return impl_->claim_ttl - 2 * impl_->max_skew;
}

bool ClockSkewGuard::beyond(std::chrono::microseconds offset) const noexcept {
  return std::chrono::abs(offset) > impl_->max_skew;
}

std::string ClockSkewGuard::skew_refusal(std::chrono::microseconds offset) const {
  return fmt::format("local clock is {} {} the {}'s, beyond max_clock_skew {}",
                     format_duration(offset < offset.zero() ? -offset : offset),
                     offset > offset.zero() ? "behind" : "ahead of", impl_->store, format_duration(impl_->max_skew));
}

bool ClockSkewGuard::before_reset(Instant scheduled, Instant reset) const noexcept {
  return scheduled < reset + impl_->max_skew;
}

std::string ClockSkewGuard::reset_refusal(std::string_view reset_name, Instant reset, std::string_view why) const {
  return fmt::format("scheduled before {} {} + max_clock_skew {}: {}; not claimed again", reset_name,
                     format_rfc3339(reset), format_duration(impl_->max_skew), why);
}

std::string ClockSkewGuard::epoch_refusal(Instant epoch) const {
  return reset_refusal("the claim store's reset epoch", epoch,
                       "the store lost (or may have lost) its claims, so a claim made before the reset could be gone");
}

void ClockSkewGuard::remember(std::chrono::microseconds offset, Clock::SteadyTime measured_at) {
  std::lock_guard guard(impl_->mutex);
  if (!impl_->offset || impl_->offset->measured_at <= measured_at) impl_->offset = ClockOffset{offset, measured_at};
}

std::optional<ClockOffset> ClockSkewGuard::last_offset() const {
  std::lock_guard guard(impl_->mutex);
  return impl_->offset;
}

std::optional<ClockOffset> ClockSkewGuard::fresh_offset() const {
  const auto now = impl_->clock->steady_now();
  std::lock_guard guard(impl_->mutex);
  if (impl_->offset && now - impl_->offset->measured_at < impl_->refresh) return impl_->offset;
  return std::nullopt;
}

}  // namespace fleetcron::backend
