#include "fleetcron/coordination.h"

#include <string>

#include "fleetcron/events.h"
#include "core/time/rfc3339_writer.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron {

std::string fire_key(std::string_view key, Instant scheduled_at) {
  // One allocation: the key, '@', then the instant written in place.
  std::string out(key.size() + 1 + detail::rfc3339_max_bytes, '\0');
  key.copy(out.data(), key.size());
  out[key.size()] = '@';
  const std::size_t written = detail::write_rfc3339(out.data() + key.size() + 1, scheduled_at, TimeZone::utc());
  out.resize(key.size() + 1 + written);
  return out;
}

std::optional<Instant> fire_key_instant(std::string_view fire_key) {
  const auto at = fire_key.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  try {
    return parse_rfc3339(fire_key.substr(at + 1));
  } catch (const std::exception&) {
    return std::nullopt;  // not a key fire_key() made
  }
}

std::vector<ClaimResult> Claimer::claim_batch(std::span<const std::string> fire_keys) {
  std::vector<ClaimResult> results;
  results.reserve(fire_keys.size());
  for (const auto& key : fire_keys) results.push_back(claim(key));
  return results;
}

std::vector<bool> Claimer::already_claimed(std::span<const std::string> fire_keys) {
  (void)fire_keys;
  return {};  // tells nothing: the fires are claimed as usual
}

std::string_view to_string(MissedFirePolicy policy) noexcept {
  switch (policy) {
    case MissedFirePolicy::run_once: return "run-once";
    case MissedFirePolicy::skip: return "skip";
    case MissedFirePolicy::run_all: return "run-all";
  }
  return "unknown";
}

std::string_view to_string(RecoverPolicy policy) noexcept {
  switch (policy) {
    case RecoverPolicy::report: return "report";
    case RecoverPolicy::rerun: return "rerun";
  }
  return "unknown";
}

std::string_view to_string(SkipReason reason) noexcept {
  switch (reason) {
    case SkipReason::unknown: return "unknown";
    case SkipReason::not_leader: return "not-leader";
    case SkipReason::election_error: return "election-error";
    case SkipReason::already_claimed: return "already-claimed";
    case SkipReason::claim_error: return "claim-error";
    case SkipReason::clock_skew: return "clock-skew";
    case SkipReason::stale: return "stale";
    case SkipReason::store_reset: return "store-reset";
    case SkipReason::overlap: return "overlap";
    case SkipReason::fleet_settings: return "fleet-settings";
    case SkipReason::registry_error: return "registry-error";
  }
  return "unknown";
}

std::string_view to_string(CancelReason reason) noexcept {
  switch (reason) {
    case CancelReason::unknown: return "unknown";
    case CancelReason::scheduler_stopped: return "scheduler-stopped";
    case CancelReason::entry_removed: return "entry-removed";
    case CancelReason::entry_paused: return "entry-paused";
    case CancelReason::stopped_before_start: return "stopped-before-start";
  }
  return "unknown";
}

std::string_view to_string(RunStatus status) noexcept {
  switch (status) {
    case RunStatus::succeeded: return "succeeded";
    case RunStatus::failed: return "failed";
    case RunStatus::timed_out: return "timed-out";
    case RunStatus::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace fleetcron
