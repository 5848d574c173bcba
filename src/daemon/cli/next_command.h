// `fleetcron next`: print the next fire instants of a spec.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>

#include "fleetcron/cron.h"

namespace fleetcron::daemon {

struct NextCommandOptions {
  std::string spec;
  bool seconds = false;            // --seconds: allow a leading seconds field
  std::string zone = "UTC";        // --tz
  std::optional<std::string> from; // --from (RFC 3339); default now
  std::size_t count = 5;           // -n
  std::string dst_gap = "shift";
  std::string dst_overlap = "first";
};

inline constexpr std::size_t next_command_max_count = 100'000;

/// Runs the command: instants on `out`, errors on `err`. Returns the exit
/// status: 0, or 2 for invalid input (spec, zone, time or option value).
int run_next_command(const NextCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fleetcron::daemon
