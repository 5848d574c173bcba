// Log lines: JSON escaping keeps every line valid JSON, whatever a job prints.
#include <gtest/gtest.h>

#include <sstream>

#include "daemon/log_sink.h"

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
  const std::string line = out.str();
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  EXPECT_NE(line.find(R"("level":"info","event":"stdout","job":"job","fire":"job@2026-01-01T00:00:00Z","message":"two\nlines"})"),
            std::string::npos)
      << line;
  std::ostringstream text_out;
  LogSink text(LogFormat::text, text_out);
  text.write("warn", "stderr", "two\nlines", "job");
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
  EXPECT_EQ(log.lost_lines(), 1u);
  log.write("info", "second", "accepted");
  EXPECT_EQ(log.lost_lines(), 1u);
  EXPECT_NE(out.str().find("second accepted"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace fleetcron::daemon
