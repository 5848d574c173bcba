// The fleet's one clock: this replica's wall clock corrected by the
// store's measured offset (store_clock.h, docs/fleet-state.md).
#include "fleetcron/store_clock.h"

#include <fmt/format.h>

#include <mutex>
#include <stdexcept>

#include "fleetcron/duration.h"
#include "fleetcron/fleet_state.h"

namespace fleetcron {

namespace {

// A failed measurement is tried again no sooner than this.
constexpr std::chrono::seconds failed_measurement_pause{1};

}  // namespace

class FLEETCRON_LOCAL StoreClock::Impl {
 public:
  Impl(FleetState& state, std::shared_ptr<Clock> clock, std::chrono::nanoseconds refresh)
      : state_(state), clock_(std::move(clock)), refresh_(refresh) {}

  Instant now() {
    std::lock_guard measuring(measure_mutex_);  // one round trip at a time
    const auto steady = clock_->steady_now();
    std::optional<StoreClockReading> last = reading();
    const bool stale = !last || steady - last->measured_at >= refresh_;
    if (stale && (!attempted_at_ || steady - *attempted_at_ >= failed_measurement_pause)) {
      attempted_at_ = steady;
      if (auto measured = measure()) last = measured;
    }
    const Instant local = clock_->now();
    return last ? local + std::chrono::duration_cast<Instant::duration>(last->offset) : local;
  }

  std::optional<StoreClockReading> reading() const {
    std::lock_guard guard(reading_mutex_);
    return reading_;
  }

 private:
  std::optional<StoreClockReading> measure() {
    const auto steady = clock_->steady_now();
    const Instant sent = clock_->now();
    std::optional<Instant> store;
    try {
      store = state_.store_now();
    } catch (...) {
      return std::nullopt;  // unreachable: the last reading stands
    }
    const Instant answered = clock_->now();
    if (!store) return std::nullopt;
    const auto half = (answered - sent) / 2;
    StoreClockReading measured{std::chrono::duration_cast<std::chrono::microseconds>(*store - (sent + half)),
                               std::chrono::ceil<std::chrono::microseconds>(half), steady};
    std::lock_guard guard(reading_mutex_);
    reading_ = measured;
    return measured;
  }

  FleetState& state_;
  std::shared_ptr<Clock> clock_;
  std::chrono::nanoseconds refresh_;
  std::mutex measure_mutex_;  // guards attempted_at_; serialises measurements
  std::optional<Clock::SteadyTime> attempted_at_;
  mutable std::mutex reading_mutex_;  // guards reading_
  std::optional<StoreClockReading> reading_;
};

StoreClock::StoreClock(FleetState& state, std::shared_ptr<Clock> clock, std::chrono::nanoseconds refresh) {
  if (!clock) throw std::invalid_argument("StoreClock: the clock is null");
  if (refresh < std::chrono::milliseconds{1} || refresh > std::chrono::hours{1}) {
    throw std::invalid_argument(
        fmt::format("StoreClock: refresh {} is out of range 1ms..1h", format_duration(refresh)));
  }
  impl_ = std::make_unique<Impl>(state, std::move(clock), refresh);
}
StoreClock::~StoreClock() = default;
Instant StoreClock::now() { return impl_->now(); }
std::optional<StoreClockReading> StoreClock::reading() const { return impl_->reading(); }

}  // namespace fleetcron
