// What a job notifies, and where (docs/daemon.md#notifications).
#pragma once

#include <string>

namespace fleetcron::daemon {

struct JobNotifications {
  std::string on_failure;  ///< a command: a run failed or timed out (its last attempt)
  std::string on_lost;     ///< a command: a run of the job was found lost
  std::string on_missed;   ///< a command: fires of the job were missed
  std::string notify;      ///< a URL: POST of the record of each of those
  std::string ping;        ///< a URL: healthchecks.io pings (URL/start, URL, URL/fail)
  [[nodiscard]] bool any() const noexcept {
    return !on_failure.empty() || !on_lost.empty() || !on_missed.empty() || !notify.empty() || !ping.empty();
  }
  friend bool operator==(const JobNotifications&, const JobNotifications&) = default;
};

}  // namespace fleetcron::daemon
