// The fleetcron program. The only translation unit that includes CLI11.
#include <CLI/CLI.hpp>

#include <iostream>

#include "daemon/next_command.h"
#include "fleetcron/version.h"

namespace {

constexpr int exit_usage = 2;

void add_next_command(CLI::App& app, fleetcron::daemon::NextCommandOptions& next) {
  CLI::App* command = app.add_subcommand("next", "Print the next fire instants of a cron spec");
  command->add_option("spec", next.spec, "Cron spec, e.g. '0 9 * * mon-fri' or '@every 90s'")->required();
  command->add_flag("--seconds", next.seconds, "Allow a leading seconds field (6 fields)");
  command->add_option("--tz", next.zone, "Zone of the spec unless it has a TZ= prefix")->default_str("UTC");
  command->add_option("--from", next.from, "Start after this RFC 3339 instant (default: now)");
  command->add_option("-n", next.count, "How many instants to print")->default_str("5");
  command->add_option("--dst-gap", next.dst_gap, "Wall times skipped by DST: shift|skip")->default_str("shift");
  command->add_option("--dst-overlap", next.dst_overlap, "Wall times repeated by DST: first|last|both")
      ->default_str("first");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fleetcron: cron for a fleet; every fire runs once"};
  app.set_version_flag("--version", FLEETCRON_VERSION_STRING);
  app.require_subcommand(1);
  fleetcron::daemon::NextCommandOptions next;
  add_next_command(app, next);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_usage;
  }
  if (app.got_subcommand("next")) return fleetcron::daemon::run_next_command(next, std::cout, std::cerr);
  return exit_usage;
}
