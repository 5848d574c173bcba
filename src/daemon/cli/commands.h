// The program's subcommands other than `next`: validate, status, history,
// pause, resume and trigger.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "daemon/config/settings.h"
#include "fleetcron/fleet_state.h"

namespace fleetcron::daemon {

/// `fleetcron validate FILE`: parses the file and prints each job's key,
/// line, spec, command and next `count` fires. Exit 0, or 2 with the error.
int run_validate_command(const Settings& settings, int count, std::ostream& out, std::ostream& err);

/// `fleetcron status --coordinator URI`: the leader's identity and term;
/// for Redis also the claims of the last hour per job. Runs nothing.
/// Which jobs `status` lists: every one up to status_list_max (a summary
/// beyond, unless `all`), or those with `prefix`, or the failing ones.
struct StatusQuery {
  bool json = false;
  bool all = false;      ///< list every job, however many
  bool failing = false;  ///< only jobs whose newest run failed, timed out or was lost, or with lost runs
  std::string prefix;    ///< only jobs whose key starts with it
};
/// More jobs than this and `status` summarises them instead of listing.
inline constexpr std::size_t status_list_max = 50;
int run_status_command(const Settings& settings, const StatusQuery& query, std::ostream& out, std::ostream& err);

/// Server-provided text made safe for a terminal: JSON-escaped (controls,
/// quotes, invalid UTF-8) and the code points a terminal acts on (C1
/// controls, line separators, bidirectional overrides) as \uXXXX.
[[nodiscard]] std::string terminal_safe(std::string_view text);

/// `fleetcron history --coordinator URI JOB [-n N] [--json]`: the job's
/// newest N ledger records (docs/fleet-state.md), newest first; text, or
/// one JSON document (docs/daemon.md has its schema). Exit 0, 1 when the
/// store cannot be read, 2 for a job with no records that the catalogue
/// does not list (the nearest keys named) or a memory coordinator (no
/// fleet state to ask).
int run_history_command(const Settings& settings, const std::string& job, std::size_t count, bool json,
                        std::ostream& out, std::ostream& err);

/// `fleetcron logs JOB [FIRE] [--list]`: the output of the job's run FIRE
/// (its fire key, or the instant after JOB@), else of its newest run, as
/// this host keeps it in output_dir (docs/daemon.md#output-of-past-runs);
/// `--list` lists the kept runs. Exit 0; 1 when it is not kept here, with
/// where it ran (from the ledger) or why it is gone.
int run_logs_command(const Settings& settings, const std::string& job, const std::string& fire, bool list,
                     std::ostream& out, std::ostream& err);

/// The coordinator's fleet state (Backend::open_fleet_state()), for the
/// commands that read or change it without a daemon. Throws if it cannot
/// be reached.
[[nodiscard]] std::shared_ptr<FleetState> open_fleet_state(const Settings& settings);

/// `fleetcron migrate`: creates the PostgreSQL coordinator's tables
/// (postgres::migrate) and prints what it did. 0, or 1 with the error on
/// `err` (2 for a coordinator that is not PostgreSQL).
int run_migrate_command(const Settings& settings, std::ostream& out, std::ostream& err);

/// `fleetcron init --coordinator URI`: declares the store new before a
/// fleet's first start (Redis: writes the claims' epoch record, unless one
/// or claims are there; NATS: creates the claims bucket and says from when
/// fires are claimed; PostgreSQL: runs migrate). 0; 1 with the error on
/// `err` (or a Redis store that holds claims); 2 for memory.
int run_init_command(const Settings& settings, std::ostream& out, std::ostream& err);

enum class ControlAction { pause, resume, trigger };

/// `fleetcron pause|resume|trigger --coordinator URI JOB [--json]`: pauses
/// or resumes the job for the whole fleet, or asks one replica to run it
/// now (docs/daemon.md#controls); a trigger with `request_id` is that
/// request's, so running the command again with it triggers nothing new.
/// A job the fleet's catalogue does not list (nor, for a resume, its
/// controls) is refused with the nearest keys unless `force` (a job no
/// replica has announced yet). Exit 0; 1 when the store fails; 2 for an
/// unknown job or a memory coordinator (no fleet to reach).
int run_control_command(const Settings& settings, ControlAction action, const std::string& job, bool json,
                        std::ostream& out, std::ostream& err, const std::string& request_id = {}, bool force = false);

}  // namespace fleetcron::daemon
