#include "daemon/observe/log_sink.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>

#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

/// Length of the valid UTF-8 sequence at text[i], or 0 if it is not one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (byte >= 0xC2 && byte <= 0xDF) {
    length = 2, code = byte & 0x1F;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    length = 3, code = byte & 0x0F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    length = 4, code = byte & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  // No overlong forms, no surrogates, nothing above U+10FFFF.
  if ((length == 3 && code < 0x800) || (length == 4 && (code < 0x10000 || code > 0x10FFFF)) ||
      (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

}  // namespace

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      // Job output may be any bytes: valid UTF-8 passes, anything else
      // becomes U+FFFD, so every line stays valid JSON.
      const std::size_t length = utf8_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.substr(i, length));
        i += length - 1;
      }
      continue;
    }
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
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string text_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += fmt::format("\\x{:02x}", byte);
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string format_line(LogFormat format, std::string_view level, std::string_view event, std::string_view message,
                        std::string_view job_key, std::string_view fire_key) {
  const Instant now{std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())};
  // Always three fraction digits, so the lines align and sort.
  std::string time = format_rfc3339(std::chrono::floor<std::chrono::seconds>(now));
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now - std::chrono::floor<std::chrono::seconds>(now));
  time.insert(time.size() - 1, fmt::format(".{:03}", millis.count()));
  std::string line;
  if (format == LogFormat::json) {
    line = fmt::format(R"({{"time":"{}","level":"{}","event":"{}")", time, level, event);
    if (!job_key.empty()) line += fmt::format(R"(,"job":"{}")", json_escape(job_key));
    if (!fire_key.empty()) line += fmt::format(R"(,"fire":"{}")", json_escape(fire_key));
    line += fmt::format(R"(,"message":"{}"}})", json_escape(message));
  } else {
    line = fmt::format("{} {:<5} {}", time, level, event);
    if (!job_key.empty()) line += fmt::format(" job={}", text_escape(job_key));
    if (!fire_key.empty()) line += fmt::format(" fire={}", text_escape(fire_key));
    // One event, one line, and nothing a terminal acts on.
    if (!message.empty()) line += " " + text_escape(message);
  }
  line += '\n';
  return line;
}

namespace {

/// Writes one line; a failed write leaves the stream bad for good, so the
/// line is counted and the state cleared: the next line is tried again.
void emit(std::ostream& out, const std::string& line, std::atomic<std::uint64_t>& lost) {
  out << line << std::flush;
  if (!out) {
    lost.fetch_add(1, std::memory_order_relaxed);
    out.clear();
  }
}

std::string dropped_line(LogFormat format, detail::RefusedGap gap) {
  return format_line(format, "warn", "log-lines-dropped",
                     fmt::format("{} log line(s) dropped: the log output could not keep up", gap.since_previous), {}, {});
}

}  // namespace

LogSink::LogSink(LogFormat format, std::ostream& out, std::size_t queue_lines)
    : format_(format),
      lost_(std::make_shared<std::atomic<std::uint64_t>>(0)),
      writer_(
          queue_lines,
          [&out, format, lost = lost_](std::string& line, detail::RefusedGap gap, std::stop_token) {
            if (gap.since_previous > 0) emit(out, dropped_line(format, gap), *lost);
            emit(out, line, *lost);
          },
          [&out, format, lost = lost_](detail::RefusedGap gap) { emit(out, dropped_line(format, gap), *lost); }) {}

LogSink::~LogSink() {
  // The output may be stuck (a full pipe): what is queued then is lost with
  // the process, and the writer is left behind in its write.
  (void)writer_.stop(std::chrono::steady_clock::now() + close_timeout, detail::BoundedWorker<std::string>::Stuck::detach);
}

bool LogSink::flush(std::chrono::milliseconds limit) { return writer_.flush(std::chrono::steady_clock::now() + limit); }

std::uint64_t LogSink::lost_lines() const noexcept { return lost_->load(std::memory_order_relaxed); }
std::uint64_t LogSink::dropped_lines() const noexcept { return writer_.refused(); }

void LogSink::write(std::string_view level, std::string_view event, std::string_view message, std::string_view job_key,
                    std::string_view fire_key) {
  std::string line = format_line(format_, level, event, message, job_key, fire_key);
  (void)writer_.push(line);  // a full queue counts the line and reports the gap with the next
}

}  // namespace fleetcron::daemon
