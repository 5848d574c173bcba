#include "daemon/cli/next_command.h"

#include <chrono>
#include <ostream>
#include <stdexcept>

#include "fleetcron/rfc3339.h"
#include "fleetcron/schedule.h"

namespace fleetcron::daemon {
namespace {

constexpr int exit_invalid_input = 2;

// Turns the command-line strings into ParseOptions and the start instant;
// throws std::invalid_argument naming the option and value.
ParseOptions parse_options(const NextCommandOptions& options) {
  ParseOptions parse;
  parse.seconds = options.seconds ? SecondsField::optional : SecondsField::none;
  parse.every_anchor = EveryAnchor::epoch;  // the instants `fleetcron run` uses
  try {
    parse.zone = TimeZone::locate(options.zone);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(std::string("option --tz: ") + error.what());
  }
  auto gap = dst_gap_from_string(options.dst_gap);
  if (!gap) throw std::invalid_argument("option --dst-gap: \"" + options.dst_gap + "\" is not shift or skip");
  auto overlap = dst_overlap_from_string(options.dst_overlap);
  if (!overlap) {
    throw std::invalid_argument("option --dst-overlap: \"" + options.dst_overlap + "\" is not first, last or both");
  }
  parse.dst = DstPolicy{*gap, *overlap};
  return parse;
}

Instant start_instant(const NextCommandOptions& options) {
  if (!options.from) return Instant{std::chrono::system_clock::now().time_since_epoch()};
  try {
    return parse_rfc3339(*options.from);
  } catch (const ParseError& error) {
    throw std::invalid_argument(std::string("option --from: ") + error.what());
  }
}

}  // namespace

int run_next_command(const NextCommandOptions& options, std::ostream& out, std::ostream& err) {
  SchedulePtr schedule;
  Instant from;
  try {
    if (options.count < 1 || options.count > next_command_max_count) {
      throw std::invalid_argument("option -n: " + std::to_string(options.count) + " is not between 1 and " +
                                  std::to_string(next_command_max_count));
    }
    const ParseOptions parse = parse_options(options);
    from = start_instant(options);
    schedule = parse_schedule(options.spec, parse);
  } catch (const std::invalid_argument& error) {
    err << "fleetcron next: " << error.what() << '\n';
    return exit_invalid_input;
  }
  const auto instants = next_n(*schedule, from, options.count);
  for (const Instant at : instants) out << format_rfc3339(at, schedule->zone()) << '\n';
  if (instants.size() < options.count) out << "none\n";
  return 0;
}

}  // namespace fleetcron::daemon
