// The daemon's record of what the scheduler did: every metric and log line
// about fires and runs is built here, from the scheduler's events alone,
// and each is written once (the scheduler's own event lines are off).
#pragma once

#include <functional>
#include <string>

#include "daemon/observe/log_sink.h"
#include "daemon/observe/metrics.h"
#include "fleetcron/events.h"

namespace fleetcron::daemon {

/// The scheduler's recorder: runs inline on the thread that made the event
/// (the loop's included), so "run-started" precedes the job's output in the
/// log. It only touches atomics, short locks and the log's queue, which
/// never waits for the output.
class FireRecorder final : public Observer {
 public:
  /// `command_of`: the command of the job with a key, for "run-started".
  FireRecorder(Metrics& metrics, LogSink& log, std::function<std::string(const std::string& key)> command_of);
  void on_event(const Event& event) override;

 private:
  void started(const JobStartedEvent& event);
  void attempt_failed(const JobAttemptFailedEvent& event);
  void completed(const JobCompletedEvent& event);
  void skipped(const SkippedFireEvent& event);
  void missed(const MissedFireEvent& event);
  void cancelled(const CancelledFireEvent& event);

  Metrics& metrics_;
  LogSink& log_;
  std::function<std::string(const std::string& key)> command_of_;
};

}  // namespace fleetcron::daemon
