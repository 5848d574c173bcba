// The account a job runs as (the user= directive): resolved from the
// passwd and group databases at load and at each reload (an unknown user
// is a load error); a job whose account changed meanwhile is replaced.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fleetcron::daemon {

struct RunAs {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // every group of the user, the primary one included
  std::string home, shell;    // from passwd: the run's HOME (and cron's SHELL default)
  friend bool operator==(const RunAs&, const RunAs&) = default;
};

/// Looks `name` up (a user name, or a numeric uid). Throws
/// std::runtime_error saying why: unknown user, or a lookup error.
[[nodiscard]] RunAs resolve_run_as(const std::string& name);

/// Whether this process can run jobs as `account`: as root, any; otherwise
/// only its own uid (a no-op). Returns "" or why not.
[[nodiscard]] std::string run_as_refusal(const RunAs& account);

}  // namespace fleetcron::daemon
