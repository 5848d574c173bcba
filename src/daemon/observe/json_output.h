// Every JSON document the daemon writes: the commands' --json (schemas in
// docs/daemon.md), the HTTP API's (docs/api.md) and the webhooks' bodies.
// Built with nlohmann-json in json_output.cpp, the one translation unit
// that includes it: instants as RFC 3339, absent values as null, text that
// is not UTF-8 with U+FFFD in its place; one line, no trailing newline.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/observe/fleet_view.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/time.h"

namespace fleetcron::daemon {

/// {"error": message}: every failed API request.
[[nodiscard]] std::string error_document(std::string_view message);

/// A ledger record: what `history --json`, the API and webhooks show of it.
[[nodiscard]] std::string record_document(const FireRecord& record);
/// `history --json`: the job (null: every job) and its records, newest first.
[[nodiscard]] std::string history_document(const std::optional<std::string>& job, const std::vector<FireRecord>& records);
/// `status --json`: the store, its leader (null without one, or on the
/// memory coordinator), the replicas and the jobs.
[[nodiscard]] std::string status_document(std::string_view coordinator, Instant at, const LeaderView& leader,
                                          const FleetView& fleet);
/// pause, resume and trigger (`--json` and the API): what changed. The
/// API's answer has `trigger_id` (null but for a trigger) and `by`; the
/// command's has `trigger_id` only for a trigger.
struct ControlAnswer {
  std::string job, action;
  bool changed = false;
  std::optional<std::string> trigger_id;
  std::optional<std::string> by;  // the API's
};
[[nodiscard]] std::string control_document(const ControlAnswer& answer);
/// A webhook's body: the event (the record's fate), the replica and the record.
/// `job_paused`: this failure paused the job (pause-on-failure=yes).
[[nodiscard]] std::string webhook_document(std::string_view replica_id, const FireRecord& record, bool job_paused = false);

/// What the API adds to a job of the fleet view.
struct ApiJob {
  const JobView* job = nullptr;
  std::vector<Instant> next_fires;
  std::optional<std::string> scope;  // replica, replica (@reboot), fleet; null: unknown here
  bool on_this_replica = false;
};
/// A page of jobs: `total` those with the query's prefix, `next` where the
/// next page starts (null: this is the last).
[[nodiscard]] std::string api_jobs_document(Instant at, const std::vector<ApiJob>& jobs, std::size_t total,
                                            const std::optional<std::string>& next);
[[nodiscard]] std::string api_job_document(const ApiJob& job);
[[nodiscard]] std::string api_runs_document(std::string_view key, const std::vector<FireRecord>& records);
[[nodiscard]] std::string api_replicas_document(const std::vector<ReplicaRecord>& replicas);
[[nodiscard]] std::string api_leader_document(const LeaderView& leader);
/// The status page's one read: everything above at once.
struct ApiFleet {
  Instant at;
  std::string replica_id, coordinator;
  bool writable = false, this_replica_leads = false;
  std::optional<LeaderView> leader;  // nullopt: `leader_error` says why it could not be read
  std::string leader_error;
  const std::vector<ReplicaRecord>* replicas = nullptr;
  std::vector<ApiJob> jobs;  // a page, as for api_jobs_document
  std::size_t jobs_total = 0;
  std::optional<std::string> next;
  std::string catalogue_error;  // a catalogue part left out (FleetIndex::catalogue_error)
  std::vector<FireRecord> recent_runs;  // the newest of the page's jobs
};
[[nodiscard]] std::string api_fleet_document(const ApiFleet& fleet);
/// A run's output as this host keeps it.
struct ApiOutput {
  std::string job, fire_key, replica_id, state;
  std::uint64_t bytes = 0;
  std::string output;
};
[[nodiscard]] std::string api_output_document(const ApiOutput& output);

}  // namespace fleetcron::daemon
