#include "daemon/observe/log_sink.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>

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

struct LogSink::State {
  explicit State(std::ostream& stream, std::size_t queue_lines, LogFormat line_format)
      : out(stream), capacity(queue_lines), format(line_format) {}
  std::ostream& out;
  const std::size_t capacity;
  const LogFormat format;
  std::mutex mutex;  // guards queue, queued, written, unreported, stopping
  std::condition_variable wake;     // the writer waits for lines
  std::condition_variable written_cv;  // flush() waits for the writer
  std::deque<std::string> queue;
  std::uint64_t queued = 0, written = 0;  // lines accepted, lines handed to the stream
  std::uint64_t unreported = 0;           // dropped since the last report
  bool stopping = false;
  std::atomic<std::uint64_t> lost{0}, dropped{0};

  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;
      std::string line = std::move(queue.front());
      queue.pop_front();
      const std::uint64_t gap = std::exchange(unreported, 0);
      lock.unlock();
      if (gap > 0) {
        emit(format_line(format, "warn", "log-lines-dropped",
                              fmt::format("{} log line(s) dropped: the log output could not keep up", gap), {}, {}));
      }
      emit(line);
      lock.lock();
      ++written;
      written_cv.notify_all();
    }
  }
  void emit(const std::string& line) {
    out << line << std::flush;
    if (!out) {
      // A failed write leaves the stream bad for good: count the line and
      // clear the state, so the next line is tried again.
      lost.fetch_add(1, std::memory_order_relaxed);
      out.clear();
    }
  }
};

LogSink::LogSink(LogFormat format, std::ostream& out, std::size_t queue_lines)
    : format_(format), state_(std::make_shared<State>(out, queue_lines == 0 ? 1 : queue_lines, format)) {
  writer_ = std::thread([state = state_] { state->run(); });
}

LogSink::~LogSink() {
  const bool drained = flush(std::chrono::duration_cast<std::chrono::milliseconds>(close_timeout));
  {
    std::lock_guard guard(state_->mutex);
    state_->stopping = true;
    if (!drained) state_->queue.clear();  // the output is stuck: what is queued is lost with the process
  }
  state_->wake.notify_all();
  if (drained) {
    writer_.join();
  } else {
    writer_.detach();  // blocked in a write the process cannot interrupt; it owns the state
  }
}

bool LogSink::flush(std::chrono::milliseconds limit) {
  std::unique_lock lock(state_->mutex);
  const std::uint64_t target = state_->queued;
  return state_->written_cv.wait_for(lock, limit, [&] { return state_->written >= target; });
}

std::uint64_t LogSink::lost_lines() const noexcept { return state_->lost.load(std::memory_order_relaxed); }
std::uint64_t LogSink::dropped_lines() const noexcept { return state_->dropped.load(std::memory_order_relaxed); }

void LogSink::write(std::string_view level, std::string_view event, std::string_view message, std::string_view job_key,
                    std::string_view fire_key) {
  std::string line = format_line(format_, level, event, message, job_key, fire_key);
  {
    std::lock_guard guard(state_->mutex);
    if (state_->stopping) return;
    if (state_->queue.size() >= state_->capacity) {
      ++state_->unreported;
      state_->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    state_->queue.push_back(std::move(line));
    ++state_->queued;
  }
  state_->wake.notify_one();
}

}  // namespace fleetcron::daemon
