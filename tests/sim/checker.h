// The simulator's judge: the four properties of docs/reliability.md,
// checked on one simulation's Outcome, and every lost fire explained.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/world.h"

namespace fleetcron::sim {

struct Violation {
  std::string property;  ///< "P1 no duplicate", "P2 no unexplained loss", "P3 fencing", "P4 missed-fire policy",
                         ///< "P5 ledger", "P6 no live run reported lost", "P7 trigger",
                         ///< "P8 catalogue" (SimOptions::ledger)
  std::string fire_key;  ///< empty when not about one fire
  std::string detail;
};

struct Report {
  std::uint64_t fires_due = 0;  ///< instants in the checked horizon, over every job
  std::uint64_t runs = 0;
  std::uint64_t duplicates_after_store_loss = 0;  ///< explained: the store lost the claim or lease between the runs
  std::uint64_t duplicates_at_handover = 0;  ///< leader mode: successive leaders (distinct terms) whose clocks differ
  std::map<std::string, std::uint64_t> lost;      ///< documented loss class -> fires
  std::uint64_t missed_plans = 0;
  /// With SimOptions::ledger: the instants by what their ledger record
  /// says ("succeeded", "skipped stale", …), or by the documented reason
  /// it has none ("no record: …").
  std::map<std::string, std::uint64_t> ledger;
  /// With SimOptions::ledger: the operator's triggers by what became of
  /// them, and the catalogue probes after wipes by their finding.
  std::map<std::string, std::uint64_t> triggers;
  std::map<std::string, std::uint64_t> catalogue;
  std::vector<Violation> violations;
  /// A minimal trace for the first violation: the fire's history and the
  /// faults around it.
  std::string trace;
};

[[nodiscard]] Report check(const SimOptions& options, const Outcome& outcome);

/// One line for a seed: due, runs, lost by class, violations.
[[nodiscard]] std::string summary(const SimOptions& options, const Report& report);

}  // namespace fleetcron::sim
