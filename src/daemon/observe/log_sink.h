// The daemon's log: one line per event, readable text or JSON lines, each
// with time, level, event, job key and fire key. Thread-safe, and it never
// blocks its callers on the output: lines go through one bounded queue to
// a writer thread of their own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "core/support/bounded_worker.h"
#include "daemon/config/settings.h"

namespace fleetcron::daemon {

class LogSink {
 public:
  /// Lines waiting for the writer at most; a line that finds the queue full
  /// is dropped, counted, and reported in one line when writing resumes.
  static constexpr std::size_t default_queue_lines = 10'000;
  /// How long the destructor waits for the queue to be written.
  static constexpr std::chrono::seconds close_timeout{2};

  /// `out` must outlive the sink, and its writer thread: if the output is
  /// still blocked after close_timeout, the destructor leaves the thread
  /// behind (the daemon writes to std::cerr).
  LogSink(LogFormat format, std::ostream& out, std::size_t queue_lines = default_queue_lines);
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  /// Formats the line and queues it; never waits for the output.
  void write(std::string_view level, std::string_view event, std::string_view message, std::string_view job_key = {},
             std::string_view fire_key = {});
  /// Waits until every line queued before the call is written, at most
  /// `limit`; true if they were.
  bool flush(std::chrono::milliseconds limit = std::chrono::milliseconds{5000});
  /// Lines the stream refused (a full disk, a closed pipe). Writing goes on
  /// with the next line: logging resumes when the stream accepts again.
  [[nodiscard]] std::uint64_t lost_lines() const noexcept;
  /// Lines dropped because the queue was full (the output could not keep up).
  [[nodiscard]] std::uint64_t dropped_lines() const noexcept;

 private:
  LogFormat format_;
  std::shared_ptr<std::atomic<std::uint64_t>> lost_;  // shared with the writer thread, which may outlive the sink
  detail::BoundedWorker<std::string> writer_;
};

/// `text` as a JSON string body (without the quotes).
[[nodiscard]] std::string json_escape(std::string_view text);
/// `text` for a text log line: control characters (ANSI escapes, CR, LF,
/// tabs) as \n \r \t \xNN, so no output can forge a line or drive a terminal.
[[nodiscard]] std::string text_escape(std::string_view text);
/// One log line, with its newline.
[[nodiscard]] std::string format_line(LogFormat format, std::string_view level, std::string_view event,
                                      std::string_view message, std::string_view job_key, std::string_view fire_key);

}  // namespace fleetcron::daemon
