// URLs as the daemon logs them: webhook and ping URLs carry their secret
// in the path, the query or the user part (a Slack webhook's path, a
// healthchecks.io ping's UUID, ?token=…), so a log line names the scheme,
// host and port only.
#pragma once

#include <string>
#include <string_view>

namespace fleetcron::daemon {

/// "https://user:pw@hooks.example:8443/T0/B1/xyz?token=t" → "https://hooks.example:8443/…";
/// text that is not a URL → "(not a URL)".
[[nodiscard]] std::string redact_url(std::string_view url);

}  // namespace fleetcron::daemon
