// The daemon's log: one line per event, readable text or JSON lines, each
// with time, level, event, job key and fire key. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>

#include "daemon/settings.h"

namespace fleetcron::daemon {

class LogSink {
 public:
  LogSink(LogFormat format, std::ostream& out) : format_(format), out_(out) {}
  void write(std::string_view level, std::string_view event, std::string_view message, std::string_view job_key = {},
             std::string_view fire_key = {});
  /// Lines the stream refused (a full disk, a closed pipe). Writing goes on
  /// with the next line: logging resumes when the stream accepts again.
  [[nodiscard]] std::uint64_t lost_lines() const noexcept { return lost_lines_.load(std::memory_order_relaxed); }

 private:
  LogFormat format_;
  std::mutex mutex_;  // one line at a time
  std::ostream& out_;
  std::atomic<std::uint64_t> lost_lines_{0};
};

/// `text` as a JSON string body (without the quotes).
[[nodiscard]] std::string json_escape(std::string_view text);

}  // namespace fleetcron::daemon
