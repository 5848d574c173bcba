// Fuzzes the jobs file parser, in both formats: any bytes either parse (and every job's
// schedule answers next()) or give a JobsFileError naming file:line:column.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/config/jobs_file.h"
#include "fleetcron/rfc3339.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fleetcron;
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  for (const auto seconds : {SecondsField::none, SecondsField::required}) {
    for (const auto format : {daemon::CrontabFormat::user, daemon::CrontabFormat::system}) {
      ParseOptions options;
      options.seconds = seconds;
      try {
        const auto file = daemon::parse_jobs_file(text, "fuzz.cron", options, {}, format);
        for (const auto& job : file.jobs) {
          if (job.key.empty() || job.command.empty() || !job.schedule) __builtin_trap();
          if (job.user_from_column && job.user.empty()) __builtin_trap();  // a system line always names its user
          (void)job.schedule->next(parse_rfc3339("2026-03-08T06:59:59Z"));
        }
      } catch (const daemon::JobsFileError& e) {
        if (std::string_view(e.what()).substr(0, 10) != "fuzz.cron:") __builtin_trap();  // always names the file
      }
    }
  }
  return 0;
}
