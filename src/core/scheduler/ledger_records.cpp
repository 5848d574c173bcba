#include "core/scheduler/ledger_records.h"

#include <fmt/format.h>

#include "fleetcron/coordination.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::detail {

namespace {

FireRecord base(const EntryRef& entry, std::string fire_key, Instant scheduled_at, const std::string& replica_id) {
  FireRecord record;
  record.job_key = entry->key;
  record.fire_key = std::move(fire_key);
  record.scheduled_at = scheduled_at;
  record.replica_id = replica_id;
  return record;
}

FireFate fate_of(RunStatus status) {
  switch (status) {
    case RunStatus::succeeded:
      return FireFate::succeeded;
    case RunStatus::failed:
      return FireFate::failed;
    case RunStatus::timed_out:
      return FireFate::timed_out;
    case RunStatus::cancelled:
      return FireFate::cancelled;
  }
  return FireFate::failed;
}

std::optional<FireRecord> started(const JobStartedEvent& e, const std::string& replica_id) {
  if (e.attempt != 1) return std::nullopt;
  FireRecord record = base(e.entry, recovery_fire_key(e.fire_key, e.recovery), e.scheduled_at, replica_id);
  record.fate = FireFate::running;
  record.manual = e.manual;
  record.fence = e.fence;
  record.attempts = 1;
  record.started_at = e.started_at;
  return record;
}

std::optional<FireRecord> completed(const JobCompletedEvent& e, const std::string& replica_id) {
  FireRecord record = base(e.entry, recovery_fire_key(e.fire_key, e.recovery), e.scheduled_at, replica_id);
  record.fate = fate_of(e.status);
  record.manual = e.manual;
  record.fence = e.fence;
  record.attempts = e.attempts;
  record.started_at = e.started_at;
  record.finished_at = e.started_at + std::chrono::duration_cast<Instant::duration>(e.duration);
  record.duration = e.duration;
  record.exit_status = e.details.exit_status;
  record.signal = e.details.signal;
  record.error = e.error;
  record.output_tail = e.details.output_tail;
  return record;
}

std::optional<FireRecord> skipped(const SkippedFireEvent& e, const std::string& replica_id) {
  // Whoever holds the claim writes the fire's fate. A follower's
  // not-leader is written (rank 0, below any other fate), so a fire that
  // nobody ran for want of a leader still has a record. A replica beyond
  // the skew guard writes nothing: its instants are dated on its own
  // clock (its skips are logged, published and counted).
  if (e.reason == SkipReason::already_claimed || e.reason == SkipReason::clock_skew) return std::nullopt;
  FireRecord record = base(e.entry, e.fire_key, e.scheduled_at, replica_id);
  record.fate = FireFate::skipped;
  record.reason = to_string(e.reason);
  record.error = e.error;
  return record;
}

std::optional<FireRecord> cancelled(const CancelledFireEvent& e, const std::string& replica_id) {
  if (!e.claimed) return std::nullopt;
  FireRecord record = base(e.entry, fire_key(e.entry->key, e.scheduled_at), e.scheduled_at, replica_id);
  record.fate = FireFate::cancelled;
  record.reason = to_string(e.reason);
  record.error = e.cause;
  return record;
}

std::optional<FireRecord> rejected(const RejectedFireEvent& e, const std::string& replica_id) {
  if (e.manual) return std::nullopt;
  FireRecord record = base(e.entry, fire_key(e.entry->key, e.scheduled_at), e.scheduled_at, replica_id);
  record.fate = FireFate::skipped;
  record.reason = "queue-full";
  record.error = "the run queue was full (max_queued)";
  return record;
}

std::string missed_reason(const MissedFireEvent& e) {
  return fmt::format("{}: {} of {}{} queued{}{}{}", to_string(e.policy), e.runs, e.missed,
                     e.missed_is_lower_bound ? " or more" : "", e.catch_up ? " (catch-up)" : "",
                     e.withheld.empty() ? "" : "; ", e.withheld);
}

std::vector<FireRecord> missed(const MissedFireEvent& e, const std::string& replica_id, bool coordinated,
                               std::size_t keep_count) {
  std::vector<FireRecord> records;
  if (!coordinated || e.catch_up) {
    FireRecord record = base(e.entry, missed_fire_key(e.entry->key, e.first_missed), e.first_missed, replica_id);
    record.fate = FireFate::missed;
    record.missed_count = e.missed;
    record.last_missed = e.last_missed;
    record.reason = missed_reason(e);
    records.push_back(std::move(record));
    return records;
  }
  // This replica's own late loop: what it saw of each fire, below anything
  // another replica records of it.
  const std::size_t skip = e.newest_missed.size() > keep_count ? e.newest_missed.size() - keep_count : 0;
  const std::string reason = missed_reason(e) + " (this replica's loop was late)";
  const std::string error = fmt::format("reached {} late", format_duration(e.lateness));
  for (std::size_t i = skip; i < e.newest_missed.size(); ++i) {
    const Instant at = e.newest_missed[i];
    FireRecord record = base(e.entry, fire_key(e.entry->key, at), at, replica_id);
    record.fate = FireFate::missed;
    record.reason = reason;
    record.error = error;
    records.push_back(std::move(record));
  }
  return records;
}

// The runner's record, written by the replica that found it expired.
FireRecord lost(const LostFireEvent& e, const std::string& replica_id) {
  FireRecord record;
  record.job_key = e.job_key;
  record.fire_key = e.fire_key;
  record.scheduled_at = e.scheduled_at;
  record.fate = FireFate::lost;
  record.replica_id = e.replica_id;
  record.fence = e.fence;
  record.attempts = 1;
  record.started_at = e.started_at;
  record.reason = fmt::format("its runner stopped announcing itself: last beat {}, record expired {}; reported by {}",
                              format_rfc3339(e.last_beat), format_rfc3339(e.expired_at), replica_id);
  return record;
}

FireRecord trigger_expired(const TriggerExpiredEvent& e, const std::string& replica_id) {
  FireRecord record;
  record.job_key = e.job_key;
  record.fire_key = fire_key(e.job_key, e.requested_at) + "#trigger-" + e.trigger_id;
  record.scheduled_at = e.requested_at;
  record.fate = FireFate::skipped;
  record.manual = true;
  record.replica_id = replica_id;
  record.reason = "trigger-expired";
  record.error = trigger_expired_text(e);
  return record;
}

std::vector<FireRecord> one(std::optional<FireRecord> record) {
  std::vector<FireRecord> records;
  if (record) records.push_back(std::move(*record));
  return records;
}

}  // namespace

std::string trigger_expired_text(const TriggerExpiredEvent& e) {
  return fmt::format("trigger {} by {}, requested {}, expired {}: no replica took it, so it did not run{}", e.trigger_id,
                     e.requested_by, format_rfc3339(e.requested_at), format_rfc3339(e.expires_at), e.note);
}

std::string missed_fire_key(const std::string& job_key, Instant first_missed) {
  return fire_key(job_key, first_missed) + "#missed";
}

std::vector<FireRecord> ledger_records(const Event& event, const std::string& replica_id, bool coordinated,
                                       std::size_t keep_count) {
  return std::visit(
      [&](const auto& e) -> std::vector<FireRecord> {
        using E = std::decay_t<decltype(e)>;
        if constexpr (requires { e.entry; }) {
          if (!e.entry || e.entry->key.empty()) return {};
        }
        if constexpr (std::is_same_v<E, JobStartedEvent>) return one(started(e, replica_id));
        if constexpr (std::is_same_v<E, JobCompletedEvent>) return one(completed(e, replica_id));
        if constexpr (std::is_same_v<E, SkippedFireEvent>) return one(skipped(e, replica_id));
        if constexpr (std::is_same_v<E, CancelledFireEvent>) return one(cancelled(e, replica_id));
        if constexpr (std::is_same_v<E, RejectedFireEvent>) return one(rejected(e, replica_id));
        if constexpr (std::is_same_v<E, MissedFireEvent>) return missed(e, replica_id, coordinated, keep_count);
        if constexpr (std::is_same_v<E, LostFireEvent>) return {lost(e, replica_id)};
        if constexpr (std::is_same_v<E, TriggerExpiredEvent>) return {trigger_expired(e, replica_id)};
        return {};
      },
      event);
}

}  // namespace fleetcron::detail
