// fleetcron_sim: runs the deterministic fleet simulation over many seeds.
//   fleetcron_sim [--seeds N] [--first-seed S] [--mode claim|leader|both]
//                 [--minutes M] [--replicas R] [--min-fires F] [--ledger] [--verbose]
// --ledger gives the fleet a fleet state and checks every instant's ledger
// record too (at most 120 minutes).
// Exit 0 when every seed holds every property, 1 on a violation (with the
// trace and the command that replays it), 2 on a bad argument.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "sim/checker.h"

namespace {

std::uint64_t number(std::string_view option, std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) {
    throw std::invalid_argument(fmt::format("option {}: \"{}\" is not a non-negative integer", option, text));
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fleetcron::sim;
  std::uint64_t seeds = 10, first_seed = 1, minutes = 15, replicas = 3, min_fires = 0;
  std::string mode = "all";
  bool verbose = false;
  bool ledger = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      auto value = [&]() -> std::string_view {
        if (i + 1 >= argc) throw std::invalid_argument(fmt::format("option {} needs a value", arg));
        return argv[++i];
      };
      if (arg == "--seeds") seeds = number(arg, value());
      else if (arg == "--first-seed") first_seed = number(arg, value());
      else if (arg == "--minutes") minutes = number(arg, value());
      else if (arg == "--replicas") replicas = number(arg, value());
      else if (arg == "--min-fires") min_fires = number(arg, value());
      else if (arg == "--mode") mode = value();
      else if (arg == "--verbose") verbose = true;
      else if (arg == "--ledger") ledger = true;
      else throw std::invalid_argument(fmt::format("unknown option \"{}\"", arg));
    }
    if (mode != "claim" && mode != "leader" && mode != "both" && mode != "all") {
      throw std::invalid_argument(fmt::format("option --mode: \"{}\" is not claim, leader, both or all", mode));
    }
    if (minutes < 5 || minutes > 10'000) throw std::invalid_argument(fmt::format("option --minutes: {} is not in 5..10000", minutes));
    if (ledger && minutes > 120) throw std::invalid_argument(fmt::format("option --minutes: {} is more than 120 with --ledger", minutes));
    if (replicas < 1 || replicas > 16) throw std::invalid_argument(fmt::format("option --replicas: {} is not in 1..16", replicas));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleetcron_sim: %s\n", e.what());
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t due = 0, runs = 0, lost = 0, dups = 0, handover_dups = 0, simulated = 0;
  std::map<std::string, std::uint64_t> lost_by_class;
  std::map<std::string, std::uint64_t> ledger_by_record;
  for (std::uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    for (const Mode m : {Mode::claim, Mode::leader, Mode::both}) {
      if (mode != "all" && mode != mode_name(m)) continue;
      SimOptions options;
      options.seed = seed;
      options.mode = m;
      options.replicas = static_cast<int>(replicas);
      options.duration = std::chrono::minutes{minutes};
      options.ledger = ledger;
      Report report;
      try {
        report = check(options, simulate(options));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fleetcron_sim: %s\n", e.what());
        return 1;
      }
      due += report.fires_due;
      runs += report.runs;
      dups += report.duplicates_after_store_loss;
      handover_dups += report.duplicates_at_handover;
      simulated += minutes;
      for (const auto& [why, n] : report.lost) {
        lost += n;
        lost_by_class[why] += n;
      }
      for (const auto& [what, n] : report.ledger) ledger_by_record[what] += n;
      if (verbose || !report.violations.empty()) std::printf("%s\n", summary(options, report).c_str());
      if (!report.violations.empty()) {
        std::printf("%s", report.trace.c_str());
        std::printf("replay: fleetcron_sim --first-seed %llu --seeds 1 --mode %s --minutes %llu --replicas %llu%s --verbose\n",
                    static_cast<unsigned long long>(seed), mode_name(m), static_cast<unsigned long long>(minutes),
                    static_cast<unsigned long long>(replicas), ledger ? " --ledger" : "");
        return 1;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("fleetcron_sim: %llu seeds from %llu, mode %s, %llu replicas: %llu simulated minutes, %llu fires due, %llu runs, "
              "%llu duplicates after store loss and %llu at leader handover (explained), %llu lost, 0 violations, %.1f s\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first_seed), mode.c_str(),
              static_cast<unsigned long long>(replicas), static_cast<unsigned long long>(simulated),
              static_cast<unsigned long long>(due), static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(dups), static_cast<unsigned long long>(handover_dups),
              static_cast<unsigned long long>(lost), seconds);
  for (const auto& [why, n] : lost_by_class) std::printf("  lost, %s: %llu\n", why.c_str(), static_cast<unsigned long long>(n));
  for (const auto& [what, n] : ledger_by_record) {
    std::printf("  ledger, %s: %llu\n", what.c_str(), static_cast<unsigned long long>(n));
  }
  if (due < min_fires) {
    std::fprintf(stderr, "fleetcron_sim: only %llu fires due, fewer than --min-fires %llu\n",
                 static_cast<unsigned long long>(due), static_cast<unsigned long long>(min_fires));
    return 1;
  }
  return 0;
}
