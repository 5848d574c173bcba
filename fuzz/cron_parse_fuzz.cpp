// libFuzzer target for the cron parser. The first byte picks the options
// (seconds mode, zone, DST policy); the rest is the spec. Anything that
// parses must yield strictly increasing instants, in whole seconds for cron
// specs, and every rejection must be a ParseError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/schedule/cron_schedule.h"
#include "fleetcron/cron.h"
#include "fleetcron/rfc3339.h"

namespace {

constexpr int chained_fires = 16;

fleetcron::ParseOptions options_from(std::uint8_t selector) {
  static const fleetcron::TimeZone zones[] = {
      fleetcron::TimeZone::utc(), fleetcron::TimeZone::locate("America/New_York"),
      fleetcron::TimeZone::locate("Australia/Lord_Howe"), fleetcron::TimeZone::locate("Europe/Berlin")};
  fleetcron::ParseOptions options;
  options.seconds = static_cast<fleetcron::SecondsField>(selector % 3);
  options.zone = zones[(selector >> 2) % 4];
  options.dst.gap = (selector >> 4) % 2 ? fleetcron::DstGap::skip : fleetcron::DstGap::shift;
  options.dst.overlap = static_cast<fleetcron::DstOverlap>((selector >> 5) % 3);
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto options = options_from(data[0]);
  const std::string_view spec(reinterpret_cast<const char*>(data + 1), size - 1);
  fleetcron::SchedulePtr schedule;
  try {
    schedule = fleetcron::parse_schedule(spec, options);
  } catch (const fleetcron::ParseError&) {
    return 0;
  }
  // Calendar specs fire on whole seconds; `@every` intervals need not.
  const bool whole_seconds = dynamic_cast<const fleetcron::detail::CronSchedule*>(schedule.get()) != nullptr;
  // Start near a New York DST change so transitions are exercised.
  fleetcron::Instant cursor = fleetcron::parse_rfc3339("2026-03-07T23:59:30Z");
  for (int i = 0; i < chained_fires; ++i) {
    const auto next = schedule->next(cursor);
    if (!next) break;
    if (*next <= cursor) std::abort();
    if (whole_seconds && next->time_since_epoch() % std::chrono::seconds{1} != std::chrono::nanoseconds{0}) {
      std::abort();
    }
    cursor = *next;
  }
  return 0;
}
