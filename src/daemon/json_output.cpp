#include "daemon/json_output.h"

#include <fmt/format.h>

#include "daemon/log_sink.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

std::string json_string(std::string_view text) { return "\"" + json_escape(text) + "\""; }

std::string json_instant(const std::optional<Instant>& at) {
  return at ? json_string(format_rfc3339(*at)) : std::string("null");
}

std::string json_number(const std::optional<int>& value) {
  return value ? std::to_string(*value) : std::string("null");
}

std::string record_json(const FireRecord& r) {
  return fmt::format(
      "{{\"job\":{},\"fire_key\":{},\"scheduled_at\":{},\"fate\":\"{}\",\"manual\":{},\"replica\":{},\"fence\":{},"
      "\"attempts\":{},\"started_at\":{},\"finished_at\":{},\"duration_seconds\":{},\"exit_status\":{},\"signal\":{},"
      "\"reason\":{},\"error\":{},\"output_tail\":{},\"missed_count\":{},\"last_missed\":{}}}",
      json_string(r.job_key), json_string(r.fire_key), json_instant(r.scheduled_at), to_string(r.fate),
      r.manual ? "true" : "false", json_string(r.replica_id), r.fence, r.attempts, json_instant(r.started_at),
      json_instant(r.finished_at), std::chrono::duration<double>(r.duration).count(), json_number(r.exit_status),
      json_number(r.signal), json_string(r.reason), json_string(r.error), json_string(r.output_tail), r.missed_count,
      json_instant(r.last_missed));
}

}  // namespace fleetcron::daemon
