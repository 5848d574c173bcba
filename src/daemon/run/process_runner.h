// Runs one command the way cron does: SHELL -c COMMAND in its own process
// group, with a given environment, directory, account and standard input; reads its stdout and stderr line by line
// (bounded), and ends it on timeout or stop: SIGTERM to the whole group,
// then SIGKILL after a grace period.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/run/run_as.h"

namespace fleetcron::daemon {

/// The most standard input a run gets (the text after '%' in a job line is
/// bounded by the line's 16 KiB): less than a pipe holds, written at once.
inline constexpr std::size_t max_input_bytes = 32 * 1024;

struct CommandSpec {
  std::string shell = "/bin/sh";
  std::string command;
  /// Standard input (Vixie cron's text after '%'); nullopt: /dev/null.
  std::optional<std::string> input;
  /// Where it runs (dir=); empty: the daemon's working directory.
  std::string working_directory;
  /// The account it runs as (user=; the daemon must be root); nullopt: the daemon's.
  std::optional<RunAs> run_as;
  /// The complete environment, "NAME=value" each.
  std::vector<std::string> environment;
  std::chrono::nanoseconds timeout{0};  // 0: none
  std::chrono::nanoseconds kill_grace = std::chrono::seconds{5};
  /// Longer lines are cut (and marked); bytes beyond max_output_bytes per
  /// run are counted but not delivered, so a noisy job cannot exhaust memory.
  std::size_t max_line_bytes = 4096;
  std::size_t max_output_bytes = 1 << 20;
};

struct CommandResult {
  bool started = false;
  std::string start_error;  // why it could not be started
  int exit_code = -1;       // when it exited
  int signal = 0;           // when a signal ended it
  bool timed_out = false;
  bool stopped = false;     // stop was requested
  std::chrono::nanoseconds duration{0};
  std::size_t output_bytes = 0;
  std::size_t dropped_bytes = 0;
  [[nodiscard]] bool succeeded() const noexcept { return started && signal == 0 && exit_code == 0; }
  /// "exit 0", "exit 3", "signal 9 (timeout)", "not started: …".
  [[nodiscard]] std::string describe() const;
};

/// Sets NAME=value in an environment ("NAME=value" entries), replacing an earlier one.
void set_variable(std::vector<std::string>& environment, const std::string& name, const std::string& value);

/// `stream` is "stdout" or "stderr"; `line` has no trailing newline.
using OutputSink = std::function<void(std::string_view stream, std::string_view line)>;

/// Blocks until the command (its main process) has ended and its output is
/// read. Never throws for a command that fails or cannot start.
[[nodiscard]] CommandResult run_command(const CommandSpec& spec, std::stop_token stop, const OutputSink& sink);

/// Reaps zombie children that no run owns: the orphaned grandchildren a
/// daemon running as PID 1 (a container's init) inherits. Runs' own shells
/// are left to their runs. Returns how many were reaped.
std::size_t reap_orphans();

}  // namespace fleetcron::daemon
