#include "daemon/observe/fire_recorder.h"

#include <fmt/format.h>

#include <chrono>

#include "fleetcron/coordination.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

std::string key_of(const EntryRef& entry) { return entry ? entry->key : std::string(); }

double seconds(std::chrono::nanoseconds duration) { return std::chrono::duration<double>(duration).count(); }

std::string rounded(std::chrono::nanoseconds duration) {
  return format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(duration));
}

}  // namespace

FireRecorder::FireRecorder(Metrics& metrics, LogSink& log, std::function<std::string(const std::string& key)> command_of)
    : metrics_(metrics), log_(log), command_of_(std::move(command_of)) {}

void FireRecorder::on_event(const Event& event) {
  if (const auto* start = std::get_if<JobStartedEvent>(&event)) {
    started(*start);
  } else if (const auto* failure = std::get_if<JobAttemptFailedEvent>(&event)) {
    attempt_failed(*failure);
  } else if (const auto* completion = std::get_if<JobCompletedEvent>(&event)) {
    completed(*completion);
  } else if (const auto* skip = std::get_if<SkippedFireEvent>(&event)) {
    skipped(*skip);
  } else if (const auto* miss = std::get_if<MissedFireEvent>(&event)) {
    missed(*miss);
  } else if (const auto* cancel = std::get_if<CancelledFireEvent>(&event)) {
    cancelled(*cancel);
  } else if (const auto* rejected = std::get_if<RejectedFireEvent>(&event)) {
    metrics_.skipped("queue-full");
    log_.write("error", "fire-rejected", "the run queue is full", key_of(rejected->entry));
  } else if (const auto* lost = std::get_if<LostFireEvent>(&event)) {
    metrics_.lost();
    log_.write("error", "fire-lost",
               fmt::format("fire {}: its runner, replica {} on {}, stopped announcing itself (last beat {}) while it "
                           "ran it (fence {}, started {}); {}",
                           lost->fire_key, lost->replica_id, lost->host, format_rfc3339(lost->last_beat), lost->fence,
                           format_rfc3339(lost->started_at),
                           lost->rerun ? std::string("running it again here") : "not run again: " + lost->not_rerun),
               lost->job_key);
  } else if (const auto* step_down = std::get_if<LeadershipStepDownEvent>(&event)) {
    metrics_.step_down();
    log_.write("error", "leadership-step-down",
               fmt::format("leading, but every claim failed for {} (last: {}): stepping down, out of the election "
                           "for {}, so a replica that can claim leads",
                           format_duration(step_down->failing_for), step_down->last_error,
                           format_duration(step_down->hold)));
  }
}

void FireRecorder::started(const JobStartedEvent& event) {
  if (event.attempt == 1) {  // one run, however many attempts
    metrics_.running(1);
    if (!event.manual) {
      metrics_.fire();
      metrics_.lateness(seconds(event.started_at - event.scheduled_at));
    }
  }
  const std::string key = key_of(event.entry);
  log_.write("info", "run-started", fmt::format("attempt {} fence {}: {}", event.attempt, event.fence, command_of_(key)),
             key, event.fire_key);
}

void FireRecorder::attempt_failed(const JobAttemptFailedEvent& event) {
  metrics_.retried();
  log_.write("warn", "attempt-failed",
             fmt::format("attempt {} {}: {}; retrying in {}", event.attempt, to_string(event.status), event.error,
                         format_duration(event.retry_in)),
             key_of(event.entry), event.fire_key);
}

void FireRecorder::completed(const JobCompletedEvent& event) {
  metrics_.running(-1);
  metrics_.run_finished(std::string(to_string(event.status)), seconds(event.duration));
  const bool succeeded = event.status == RunStatus::succeeded;
  std::string message = std::string(to_string(event.status));
  if (!event.error.empty()) message += ": " + event.error;
  message += " in " + rounded(event.duration);
  if (event.attempts > 1) message += fmt::format(" after {} attempts", event.attempts);
  if (event.paused) message += "; the job is paused (pause-on-failure): resume it to run it again";
  log_.write(succeeded ? "info" : "warn", "run-finished", message, key_of(event.entry), event.fire_key);
}

void FireRecorder::skipped(const SkippedFireEvent& event) {
  metrics_.skipped(std::string(to_string(event.reason)));
  // Another replica's fire (claimed there, or we follow): normal
  // coordination, counted but not logged — unless it says more (a term
  // lost, or changed during the jitter: then no replica may run the fire).
  const bool routine = event.reason == SkipReason::already_claimed || event.reason == SkipReason::not_leader;
  if (routine && event.error.empty()) return;
  const std::string why = event.error.empty() ? std::string(to_string(event.reason))
                                              : fmt::format("{}: {}", to_string(event.reason), event.error);
  log_.write("warn", "fire-skipped", why, key_of(event.entry), event.fire_key);
}

void FireRecorder::missed(const MissedFireEvent& event) {
  metrics_.missed(event.missed);
  if (event.catch_up) {
    log_.write("warn", "catch-up",
               fmt::format("the fleet missed {}{} fire(s) from {} to {} while it was down; policy {} runs {}, once "
                           "across the fleet{}{}",
                           event.missed, event.missed_is_lower_bound ? "+" : "", format_rfc3339(event.first_missed),
                           format_rfc3339(event.last_missed), to_string(event.policy), event.runs,
                           event.withheld.empty() ? "" : "; ", event.withheld),
               key_of(event.entry));
    return;
  }
  log_.write("warn", "fires-missed",
             fmt::format("{}{} fire(s) from {} to {} missed ({} late); policy {} runs {}", event.missed,
                         event.missed_is_lower_bound ? "+" : "", format_rfc3339(event.first_missed),
                         format_rfc3339(event.last_missed), rounded(event.lateness), to_string(event.policy), event.runs),
             key_of(event.entry));
}

void FireRecorder::cancelled(const CancelledFireEvent& event) {
  metrics_.cancelled(event.reason, event.claimed);
  const std::string fire = event.entry ? fire_key(event.entry->key, event.scheduled_at) : std::string();
  if (event.claimed) {
    log_.write("error", "fire-cancelled",
               fmt::format("{} ({}); it was claimed by this replica, so no replica runs it: lost", event.cause,
                           to_string(event.reason)),
               key_of(event.entry), fire);
    return;
  }
  log_.write("warn", "fire-cancelled", fmt::format("{} ({})", event.cause, to_string(event.reason)), key_of(event.entry),
             fire);
}

}  // namespace fleetcron::daemon
