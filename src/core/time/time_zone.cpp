#include "fleetcron/time_zone.h"

#include <stdexcept>
#include <string>

#include "core/time/zone_rules.h"
#include "fleetcron/parse_error.h"

namespace fleetcron {

namespace {
constexpr std::size_t max_zone_name_bytes = 255;
}

TimeZone TimeZone::utc() noexcept { return TimeZone(&detail::ZoneRules::utc()); }

TimeZone TimeZone::locate(std::string_view name) {
  const detail::ZoneRules* rules = nullptr;
  if (!name.empty() && name.size() <= max_zone_name_bytes) rules = detail::ZoneRules::find(name);
  if (rules == nullptr) {
    throw std::invalid_argument("unknown time zone \"" + quote_for_message(name) + "\"");
  }
  return TimeZone(rules);
}

std::string_view TimeZone::name() const noexcept { return rules_->name(); }

bool TimeZone::is_utc() const noexcept { return rules_->is_utc(); }

std::chrono::seconds TimeZone::offset_at(Instant at) const noexcept {
  const auto at_s = std::chrono::floor<std::chrono::seconds>(at).time_since_epoch().count();
  return std::chrono::seconds{rules_->period_at(at_s).offset_s};
}

}  // namespace fleetcron

namespace fleetcron::detail {

const ZoneRules& rules_of(const TimeZone& zone) noexcept { return *zone.rules_; }

}  // namespace fleetcron::detail
