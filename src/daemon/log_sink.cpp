#include "daemon/log_sink.h"

#include <fmt/format.h>

#include <chrono>

#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += fmt::format("\\u{:04x}", byte);
        } else {
          out.push_back(c);  // UTF-8 passes through; invalid bytes too (documented)
        }
    }
  }
  return out;
}

void LogSink::write(std::string_view level, std::string_view event, std::string_view message, std::string_view job_key,
                    std::string_view fire_key) {
  const Instant now{std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())};
  // Always three fraction digits, so the lines align and sort.
  std::string time = format_rfc3339(std::chrono::floor<std::chrono::seconds>(now));
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now - std::chrono::floor<std::chrono::seconds>(now));
  time.insert(time.size() - 1, fmt::format(".{:03}", millis.count()));
  std::string line;
  if (format_ == LogFormat::json) {
    line = fmt::format(R"({{"time":"{}","level":"{}","event":"{}")", time, level, event);
    if (!job_key.empty()) line += fmt::format(R"(,"job":"{}")", json_escape(job_key));
    if (!fire_key.empty()) line += fmt::format(R"(,"fire":"{}")", json_escape(fire_key));
    line += fmt::format(R"(,"message":"{}"}})", json_escape(message));
  } else {
    line = fmt::format("{} {:<5} {}", time, level, event);
    if (!job_key.empty()) line += fmt::format(" job={}", job_key);
    if (!fire_key.empty()) line += fmt::format(" fire={}", fire_key);
    if (!message.empty()) {
      line += ' ';
      // One event, one line: a newline inside a message is shown escaped.
      for (const char c : message) line += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
  }
  line += '\n';
  std::lock_guard guard(mutex_);
  out_ << line << std::flush;
}

}  // namespace fleetcron::daemon
