#include "daemon/observe/json_output.h"

#include <nlohmann/json.hpp>

#include "fleetcron/replica_registry.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/version.h"

namespace fleetcron::daemon {

namespace {

using Json = nlohmann::ordered_json;  // the fields in the documented order

std::string dump(const Json& document) {
  // Job output and names may hold any bytes: what is not UTF-8 becomes U+FFFD.
  return document.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json instant(const std::optional<Instant>& at) { return at ? Json(format_rfc3339(*at)) : Json(nullptr); }

template <typename T>
Json optional_value(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json record(const FireRecord& r) {
  return Json{{"job", r.job_key},
              {"fire_key", r.fire_key},
              {"scheduled_at", instant(r.scheduled_at)},
              {"fate", to_string(r.fate)},
              {"manual", r.manual},
              {"replica", r.replica_id},
              {"fence", r.fence},
              {"attempts", r.attempts},
              {"started_at", instant(r.started_at)},
              {"finished_at", instant(r.finished_at)},
              {"duration_seconds", std::chrono::duration<double>(r.duration).count()},
              {"exit_status", optional_value(r.exit_status)},
              {"signal", optional_value(r.signal)},
              {"reason", r.reason},
              {"error", r.error},
              {"output_tail", r.output_tail},
              {"missed_count", r.missed_count},
              {"last_missed", instant(r.last_missed)}};
}

Json optional_record(const std::optional<FireRecord>& r) { return r ? record(*r) : Json(nullptr); }

Json records(const std::vector<FireRecord>& list) {
  Json out = Json::array();
  for (const auto& r : list) out.push_back(record(r));
  return out;
}

Json replica(const ReplicaRecord& r) {
  Json settings = Json::object();
  for (const auto& s : r.replica.settings) settings[s.name] = s.value;
  return Json{{"id", r.replica.replica_id},
              {"host", r.replica.host},
              {"pid", r.replica.pid},
              {"version", r.replica.version},
              {"started_at", instant(r.replica.started)},
              {"beat_at", instant(r.beat)},
              {"expires_at", instant(r.expires_at)},
              {"accepted", r.accepted},
              {"settings_fingerprint", settings_fingerprint(r.replica.settings)},
              {"jobs_digest", r.replica.jobs_digest},
              {"settings", std::move(settings)}};
}

Json replicas(const std::vector<ReplicaRecord>& list) {
  Json out = Json::array();
  for (const auto& r : list) out.push_back(replica(r));
  return out;
}

Json job(const JobView& job) {
  const bool paused = job.control && job.control->paused;
  const bool removed = job.catalogued && job.catalogued->removed;
  return Json{{"job", job.key},
              {"spec", job.catalogued ? Json(job.catalogued->spec) : Json(nullptr)},
              {"zone", job.catalogued ? Json(job.catalogued->zone) : Json(nullptr)},
              {"next_fire", instant(job.next_fire)},
              {"last_run", optional_record(job.last_run)},
              {"last_success", optional_record(job.last_success)},
              {"running", records(job.running)},
              {"paused", paused},
              {"paused_by", paused ? Json(job.control->changed_by) : Json(nullptr)},
              {"paused_at", paused ? instant(job.control->changed_at) : Json(nullptr)},
              {"triggers_waiting", job.control ? job.control->triggers.size() : 0},
              {"every_replica", job.catalogued && job.catalogued->every_replica},
              {"removed_at", instant(removed ? job.catalogued->removed : std::nullopt)},
              {"removed_by", removed ? Json(job.catalogued->seen_by) : Json(nullptr)}};
}

Json leader(const LeaderView& leader) {
  if (!leader.holder) return nullptr;
  return Json{{"holder", *leader.holder},
              {"term", optional_value(leader.term)},
              {"lease_expires_in_ms", optional_value(leader.expires_in_ms)},
              {"renewed_revision", optional_value(leader.renewed_revision)}};
}

Json api_job(const ApiJob& entry) {
  Json out = job(*entry.job);
  Json next = Json::array();
  for (const Instant at : entry.next_fires) next.push_back(format_rfc3339(at));
  out["next_fires"] = std::move(next);
  out["scope"] = optional_value(entry.scope);
  out["on_this_replica"] = entry.on_this_replica;
  out["lost_recently"] = entry.job->lost;
  out["recent_runs"] = records(entry.job->recent);
  return out;
}

Json api_jobs(const std::vector<ApiJob>& list) {
  Json out = Json::array();
  for (const auto& entry : list) out.push_back(api_job(entry));
  return out;
}

}  // namespace

std::string error_document(std::string_view message) { return dump(Json{{"error", message}}); }

std::string record_document(const FireRecord& r) { return dump(record(r)); }

std::string history_document(const std::optional<std::string>& job_key, const std::vector<FireRecord>& list) {
  return dump(Json{{"job", optional_value(job_key)}, {"records", records(list)}});
}

std::string status_document(std::string_view coordinator, Instant at, const LeaderView& leader_view,
                            const FleetView& fleet) {
  Json jobs = Json::array();
  for (const auto& j : fleet.jobs) jobs.push_back(job(j));
  return dump(Json{{"coordinator", coordinator},
                   {"at", instant(at)},
                   {"leader", leader(leader_view)},
                   {"replicas", replicas(fleet.replicas)},
                   {"jobs", std::move(jobs)}});
}

std::string control_document(const ControlAnswer& answer) {
  Json out{{"job", answer.job}, {"action", answer.action}, {"changed", answer.changed}};
  if (answer.by || answer.trigger_id) out["trigger_id"] = optional_value(answer.trigger_id);
  if (answer.by) out["by"] = *answer.by;
  return dump(out);
}

std::string webhook_document(std::string_view replica_id, const FireRecord& r, bool job_paused) {
  return dump(Json{{"event", to_string(r.fate)}, {"replica", replica_id}, {"job_paused", job_paused}, {"record", record(r)}});
}

std::string api_jobs_document(Instant at, const std::vector<ApiJob>& list, std::size_t total,
                              const std::optional<std::string>& next) {
  return dump(Json{{"at", instant(at)}, {"jobs", api_jobs(list)}, {"total", total}, {"next", optional_value(next)}});
}

std::string api_job_document(const ApiJob& entry) { return dump(Json{{"job", api_job(entry)}}); }

std::string api_runs_document(std::string_view key, const std::vector<FireRecord>& list) {
  return dump(Json{{"job", key}, {"runs", records(list)}});
}

std::string api_replicas_document(const std::vector<ReplicaRecord>& list) {
  return dump(Json{{"replicas", replicas(list)}});
}

std::string api_leader_document(const LeaderView& leader_view) { return dump(Json{{"leader", leader(leader_view)}}); }

std::string api_fleet_document(const ApiFleet& fleet) {
  return dump(Json{{"at", instant(fleet.at)},
                   {"replica", fleet.replica_id},
                   {"coordinator", fleet.coordinator},
                   {"version", FLEETCRON_VERSION_STRING},
                   {"writable", fleet.writable},
                   {"leader", fleet.leader ? leader(*fleet.leader) : Json(nullptr)},
                   {"leader_error", fleet.leader ? Json(nullptr) : Json(fleet.leader_error)},
                   {"this_replica_leads", fleet.this_replica_leads},
                   {"replicas", replicas(*fleet.replicas)},
                   {"jobs", api_jobs(fleet.jobs)},
                   {"jobs_total", fleet.jobs_total},
                   {"catalogue_error", fleet.catalogue_error.empty() ? Json(nullptr) : Json(fleet.catalogue_error)},
                   {"next", optional_value(fleet.next)},
                   {"recent_runs", records(fleet.recent_runs)}});
}

std::string api_output_document(const ApiOutput& output) {
  return dump(Json{{"job", output.job},
                   {"fire_key", output.fire_key},
                   {"replica", output.replica_id},
                   {"state", output.state},
                   {"bytes", output.bytes},
                   {"output", output.output}});
}

}  // namespace fleetcron::daemon
