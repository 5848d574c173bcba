#include "daemon/log_sink.h"

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
  if (!out_) {
    // A failed write leaves the stream bad for good: count the line and
    // clear the state, so the next line is tried again.
    lost_lines_.fetch_add(1, std::memory_order_relaxed);
    out_.clear();
  }
}

}  // namespace fleetcron::daemon
