#include "daemon/observe/json_output.h"

#include <fmt/format.h>

#include "daemon/observe/log_sink.h"
#include "fleetcron/replica_registry.h"
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

std::string optional_record_json(const std::optional<FireRecord>& record) {
  return record ? record_json(*record) : std::string("null");
}

std::string replica_json(const ReplicaRecord& r) {
  std::string settings;
  for (const auto& s : r.replica.settings) settings += fmt::format("{}{}:{}", settings.empty() ? "" : ",", json_string(s.name), json_string(s.value));
  return fmt::format("{{\"id\":{},\"host\":{},\"pid\":{},\"version\":{},\"started_at\":{},\"beat_at\":{},"
                     "\"expires_at\":{},\"accepted\":{},\"settings_fingerprint\":{},\"jobs_digest\":{},\"settings\":{{{}}}}}",
                     json_string(r.replica.replica_id), json_string(r.replica.host), r.replica.pid,
                     json_string(r.replica.version), json_instant(r.replica.started), json_instant(r.beat),
                     json_instant(r.expires_at), r.accepted ? "true" : "false",
                     json_string(settings_fingerprint(r.replica.settings)), json_string(r.replica.jobs_digest), settings);
}

std::string job_json(const JobView& job, std::string_view extra_fields) {
  std::string running;
  for (const auto& run : job.running) running += (running.empty() ? "" : ",") + record_json(run);
  const bool paused = job.control && job.control->paused;
  const bool removed = job.catalogued && job.catalogued->removed;
  return fmt::format(
      "{{\"job\":{},\"spec\":{},\"zone\":{},\"next_fire\":{},\"last_run\":{},\"last_success\":{},\"running\":[{}],"
      "\"paused\":{},\"paused_by\":{},\"paused_at\":{},\"triggers_waiting\":{},\"every_replica\":{},"
      "\"removed_at\":{},\"removed_by\":{}{}}}",
      json_string(job.key), job.catalogued ? json_string(job.catalogued->spec) : "null",
      job.catalogued ? json_string(job.catalogued->zone) : "null", json_instant(job.next_fire),
      optional_record_json(job.last_run), optional_record_json(job.last_success), running, paused ? "true" : "false",
      paused ? json_string(job.control->changed_by) : "null",
      paused ? json_instant(job.control->changed_at) : std::string("null"),
      job.control ? job.control->triggers.size() : 0,
      job.catalogued && job.catalogued->every_replica ? "true" : "false",
      json_instant(removed ? job.catalogued->removed : std::nullopt), removed ? json_string(job.catalogued->seen_by) : "null",
      extra_fields);
}

std::string leader_json(const LeaderView& leader) {
  if (!leader.holder) return "null";
  return fmt::format("{{\"holder\":{},\"term\":{},\"lease_expires_in_ms\":{},\"renewed_revision\":{}}}",
                     json_string(*leader.holder), leader.term ? json_string(*leader.term) : "null",
                     leader.expires_in_ms ? std::to_string(*leader.expires_in_ms) : "null",
                     leader.renewed_revision ? std::to_string(*leader.renewed_revision) : "null");
}

}  // namespace fleetcron::daemon
