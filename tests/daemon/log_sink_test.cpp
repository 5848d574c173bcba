// Log lines: JSON escaping keeps every line valid JSON, whatever a job prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "daemon/observe/log_sink.h"

namespace fleetcron::daemon {
namespace {

TEST(LogSink, JsonEscapingHandlesControlsQuotesAndInvalidUtf8) {
  EXPECT_EQ(json_escape("a\"b\\c\n\t\x01"), "a\\\"b\\\\c\\n\\t\\u0001");
  EXPECT_EQ(json_escape("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");  // valid UTF-8 stays
  EXPECT_EQ(json_escape("bad \xFF end"), "bad \\ufffd end");
  EXPECT_EQ(json_escape("cut \xE2\x82"), "cut \\ufffd\\ufffd");          // a truncated sequence
  EXPECT_EQ(json_escape("\xC0\xAF"), "\\ufffd\\ufffd");                  // an overlong '/'
  EXPECT_EQ(json_escape("\xED\xA0\x80"), "\\ufffd\\ufffd\\ufffd");       // a surrogate
}

TEST(LogSink, OneLinePerEventWithJobAndFireKeys) {
  std::ostringstream out;
  LogSink json(LogFormat::json, out);
  json.write("info", "stdout", "two\nlines", "job", "job@2026-01-01T00:00:00Z");
  ASSERT_TRUE(json.flush());
  const std::string line = out.str();
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  EXPECT_NE(line.find(R"("level":"info","event":"stdout","job":"job","fire":"job@2026-01-01T00:00:00Z","message":"two\nlines"})"),
            std::string::npos)
      << line;
  std::ostringstream text_out;
  LogSink text(LogFormat::text, text_out);
  text.write("warn", "stderr", "two\nlines", "job");
  ASSERT_TRUE(text.flush());
  EXPECT_NE(text_out.str().find("warn  stderr job=job two\\nlines\n"), std::string::npos) << text_out.str();
  EXPECT_EQ(text_out.str()[23], 'Z');  // 2026-…T…:…:….mmmZ: milliseconds always
}

// A full disk: the lost line is counted and the next one is tried again
// (std::ostream would otherwise stay bad and drop every later line).
TEST(LogSink, AFailedWriteIsCountedAndLoggingResumes) {
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  out.setstate(std::ios::badbit);  // as a write to a full disk leaves it
  log.write("info", "first", "refused");
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(log.lost_lines(), 1u);
  log.write("info", "second", "accepted");
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(log.lost_lines(), 1u);
  EXPECT_NE(out.str().find("second accepted"), std::string::npos) << out.str();
}

// Review: job output and server messages reached text logs raw (ANSI
// escapes, CR), as JSON logs never did.
TEST(LogSink, TextLinesEscapeControlCharacters) {
  EXPECT_EQ(text_escape("red \x1b[31mX\x1b[0m\rover\ttab\\"), "red \\x1b[31mX\\x1b[0m\\rover\\ttab\\\\");
  std::ostringstream out;
  LogSink log(LogFormat::text, out);
  log.write("info", "stdout", "\x1b]0;title\x07forged\n2026 info fake", "job");
  ASSERT_TRUE(log.flush());
  const std::string line = out.str();
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
}

/// A stream whose writes block until released: a wedged log driver, a
/// full pipe nobody reads.
class BlockingBuffer final : public std::stringbuf {
 public:
  void release() {
    {
      std::lock_guard guard(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
    return std::stringbuf::xsputn(s, n);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Review: a blocked stderr stopped the replica (the loop and every worker
// wrote synchronously) while its keep-alive kept the lease.
TEST(LogSink, ABlockedOutputNeverBlocksWritersAndDropsAreReported) {
  BlockingBuffer buffer;
  std::ostream out(&buffer);
  {
    LogSink log(LogFormat::text, out, 4);
    for (int i = 0; i < 100; ++i) log.write("info", "stdout", "line " + std::to_string(i));  // returns at once
    EXPECT_GE(log.dropped_lines(), 95u);  // one in the writer's hands, four queued
    EXPECT_FALSE(log.flush(std::chrono::milliseconds{50}));
    buffer.release();
    ASSERT_TRUE(log.flush());
    log.write("info", "after", "the output accepts again");
    ASSERT_TRUE(log.flush());
  }
  const std::string text = buffer.str();
  EXPECT_NE(text.find("log-lines-dropped"), std::string::npos) << text;
  EXPECT_NE(text.find("after the output accepts again"), std::string::npos) << text;
}

}  // namespace
}  // namespace fleetcron::daemon
