// The per-job directive comment of the jobs file:
//
//   # fleetcron: key=nightly timeout=30m scope=replica dir="/srv/my app"
//
// name=value options separated by blanks; a value may be quoted ("…" or
// '…', no escapes inside) to hold blanks. docs/daemon.md lists them.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/cron.h"
#include "fleetcron/events.h"
#include "fleetcron/schedule.h"

namespace fleetcron::daemon {

/// What a fire does when the previous run of the same job still runs.
enum class Overlap {
  skip,   ///< the fire is skipped and reported (default)
  allow,  ///< runs concurrently
  queue,  ///< waits for the running one; at most one waiting run
};
[[nodiscard]] std::string_view to_string(Overlap overlap) noexcept;

/// Where a job runs: once across the fleet (claimed or leader-gated, as
/// the daemon coordinates), or on every replica (never coordinated).
enum class JobScope { fleet, replica };
[[nodiscard]] std::string_view to_string(JobScope scope) noexcept;

/// One line of a file being parsed, for error positions (file:line:column).
struct SourceLine {
  const std::string& path;
  int number;
  std::string_view text;

  [[noreturn]] void fail(std::size_t offset, const std::string& reason) const;
  [[nodiscard]] std::size_t offset_of(std::string_view part) const {
    return static_cast<std::size_t>(part.data() - text.data());
  }
};

/// A directive's options as written; unset ones take the defaults.
struct Directive {
  int line = 0;
  std::optional<std::string> key;
  std::optional<std::chrono::nanoseconds> timeout, jitter, catch_up;
  std::optional<int> retries;
  /// Per job: ledger records kept (history=), runs' output kept (keep-succeeded=, keep-failed=).
  std::optional<std::size_t> history, keep_succeeded, keep_failed;
  std::optional<Overlap> overlap;
  std::optional<MissedFirePolicy> missed;
  std::optional<DstGap> gap;
  std::optional<DstOverlap> dst_overlap;
  std::optional<RecoverPolicy> recover;
  std::optional<bool> pause_on_failure;
  std::optional<JobScope> scope;
  std::optional<std::string> dir, env_file, user;
  std::optional<std::string> on_failure, on_lost, on_missed, notify, ping;
  /// Column (0-based) of each path-like option's value, for errors found
  /// when the file is loaded (a missing directory, a bad env file).
  std::size_t dir_at = 0, env_file_at = 0, user_at = 0;
  std::size_t jitter_at = 0;  // of the option's name: the scheduler's rules refuse the whole option
};

/// Parses the text after "fleetcron:"; throws JobsFileError at the option.
[[nodiscard]] Directive parse_directive(const SourceLine& line, std::string_view body);

}  // namespace fleetcron::daemon
