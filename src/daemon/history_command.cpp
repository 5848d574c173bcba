// `fleetcron history`: a job's run ledger, read from the coordination store.
#include <fmt/format.h>

#include <memory>

#include "daemon/commands.h"
#include "daemon/coordination_setup.h"
#include "daemon/log_sink.h"
#include "fleetcron/nats/fleet_state.h"
#include "fleetcron/redis/fleet_state.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

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

/// One line per record; text from the store is escaped.
std::string record_line(const FireRecord& r) {
  std::string line = fmt::format("{}  {:<9}", format_rfc3339(r.scheduled_at), to_string(r.fate));
  if (r.manual) line += "  manual";
  line += fmt::format("  on {}", terminal_safe(r.replica_id));
  if (r.fence != 0) line += fmt::format("  fence {}", r.fence);
  if (r.started_at && r.fate != FireFate::running) line += fmt::format("  took {}", format_duration(r.duration));
  if (r.attempts > 1) line += fmt::format("  attempts {}", r.attempts);
  if (r.exit_status) line += fmt::format("  exit {}", *r.exit_status);
  if (r.signal) line += fmt::format("  signal {}", *r.signal);
  if (r.fate == FireFate::missed) {
    line += fmt::format("  {} instants to {}", r.missed_count, r.last_missed ? format_rfc3339(*r.last_missed) : "?");
  }
  if (!r.reason.empty()) line += "  " + terminal_safe(r.reason);
  if (!r.error.empty()) line += ": " + terminal_safe(r.error);
  return line + "\n";
}

}  // namespace

std::shared_ptr<FleetState> open_fleet_state(Settings settings) {  // a copy: parsing the URI fills it in
  if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
    const auto options = parse_nats_uri(settings.coordinator, settings);
    auto connection = nats::Connection::connect(options);
    return std::make_shared<nats::FleetState>(connection->bucket(effective_fleet_bucket(settings)));
  }
  auto client = std::make_shared<redis::Client>(redis_options(settings));
  return std::make_shared<redis::FleetState>(client,
                                             redis::FleetStateOptions{.fleet_prefix = effective_fleet_prefix(settings)});
}

int run_history_command(const Settings& settings, const std::string& job, std::size_t count, bool json,
                        std::ostream& out, std::ostream& err) {
  if (settings.coordinator == "memory") {
    err << "history: the memory coordinator keeps no state outside its process; use redis:// or nats://\n";
    return 2;
  }
  try {
    const LedgerRead read = open_fleet_state(settings)->read_fires(job, count);
    if (read.status != LedgerRead::Status::found) {
      err << "history: " << read.error << '\n';
      return 1;
    }
    if (json) {
      out << "{\"job\":" << json_string(job) << ",\"records\":[";
      for (std::size_t i = 0; i < read.records.size(); ++i) out << (i == 0 ? "" : ",") << record_json(read.records[i]);
      out << "]}\n";
      return 0;
    }
    if (read.records.empty()) out << "job \"" << terminal_safe(job) << "\": no records\n";
    for (const auto& record : read.records) out << record_line(record);
    return 0;
  } catch (const std::exception& e) {
    err << "history: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
