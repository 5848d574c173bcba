#include "daemon/config/settings.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "daemon/backends/backend.h"
#include "daemon/run/run_output.h"
#include "fleetcron/duration.h"
#include "fleetcron/fire_record.h"

namespace fleetcron::daemon {

std::string_view to_string(CoordinationMode mode) noexcept {
  switch (mode) {
    case CoordinationMode::claim: return "claim";
    case CoordinationMode::leader: return "leader";
    case CoordinationMode::both: return "both";
  }
  return "unknown";
}

std::optional<CoordinationMode> coordination_mode_from_string(std::string_view text) noexcept {
  if (text == "claim") return CoordinationMode::claim;
  if (text == "leader") return CoordinationMode::leader;
  if (text == "both") return CoordinationMode::both;
  return std::nullopt;
}

std::string_view to_string(LeadershipLoss policy) noexcept {
  return policy == LeadershipLoss::cancel ? "cancel" : "finish";
}

std::optional<LeadershipLoss> leadership_loss_from_string(std::string_view text) noexcept {
  if (text == "cancel") return LeadershipLoss::cancel;
  if (text == "finish") return LeadershipLoss::finish;
  return std::nullopt;
}

namespace {

// A duration, or std::invalid_argument saying why the text is not one.
std::chrono::nanoseconds duration_of(std::string_view text) {
  try {
    return parse_duration(text);
  } catch (const DurationError& e) {
    throw std::invalid_argument(e.what());
  }
}

}  // namespace

std::chrono::nanoseconds parse_catch_up(std::string_view text) {
  const auto value = duration_of(text);
  if (value < std::chrono::nanoseconds::zero()) throw std::invalid_argument("must not be negative");
  if (value > std::chrono::hours{24 * 366}) throw std::invalid_argument("is above the maximum of 366 days");
  return value;
}

std::string default_output_dir() {
  if (const char* state = std::getenv("STATE_DIRECTORY"); state != nullptr && *state != '\0') {
    const std::string_view first(state, std::strcspn(state, ":"));  // systemd lists several with ':'
    return std::string(first) + "/runs";
  }
  if (::geteuid() == 0) return "/var/lib/fleetcron/runs";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg == '/') return std::string(xdg) + "/fleetcron/runs";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home != '/') return {};  // no home of its own: nowhere (not a shared /tmp)
  return std::string(home) + "/.local/state/fleetcron/runs";
}

std::string output_dir_from(std::string_view text) { return text == "none" ? std::string() : std::string(text); }

std::chrono::nanoseconds parse_history_age(std::string_view text) {
  const auto value = duration_of(text);
  if (value < std::chrono::milliseconds{1}) throw std::invalid_argument("is below the minimum of 1ms");
  if (value > LedgerRetention::max_keep_for) throw std::invalid_argument("is above the maximum of 400 days");
  return value;
}

namespace {

// `name` with `suffix` replaced by `replacement`, or `joined` appended.
std::string derived_name(std::string_view name, std::string_view suffix, std::string_view replacement,
                         std::string_view joined) {
  if (name.ends_with(suffix)) return std::string(name.substr(0, name.size() - suffix.size())) + std::string(replacement);
  return std::string(name) + std::string(joined);
}

}  // namespace

std::string effective_fleet_prefix(const Settings& settings) {
  if (!settings.fleet_prefix.empty()) return settings.fleet_prefix;
  return derived_name(settings.claim_prefix, "claim:", "fleet:", "fleet:");
}

std::string effective_fleet_bucket(const Settings& settings) {
  if (!settings.fleet_bucket.empty()) return settings.fleet_bucket;
  return derived_name(settings.claim_bucket, "CLAIMS", "STATE", "_STATE");
}

ListenAddress parse_listen_address(const std::string& text, std::string_view option) {
  const auto colon = text.rfind(':');
  ListenAddress address;
  std::string port = text;
  if (colon != std::string::npos) {
    address.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  if (address.host.empty()) address.host = "127.0.0.1";  // a bare port is loopback, never every interface
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), address.port);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || address.port < 0 ||
      address.port > 65535) {
    throw SettingsError(fmt::format("option {} \"{}\": expected [host]:port with a port of 0..65535", option, text));
  }
  return address;
}

LeadershipLoss effective_leadership_loss(const Settings& settings) noexcept {
  if (settings.on_leadership_loss) return *settings.on_leadership_loss;
  return settings.coordination == CoordinationMode::both ? LeadershipLoss::finish : LeadershipLoss::cancel;
}

std::string without_userinfo(const std::string& uri) {
  const auto at = uri.rfind('@');
  if (at == std::string::npos) return uri;
  const auto scheme = uri.find("://");
  const std::size_t start = scheme != std::string::npos && scheme < at ? scheme + 3 : 0;
  return uri.substr(0, start) + "***" + uri.substr(at);
}

std::string read_secret_file(const std::string& path, std::string_view what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw SettingsError(fmt::format("{} {}: cannot read: {}", what, path, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) throw SettingsError(fmt::format("{} {}: not a regular file", what, path));
  if (info.st_size > 4098) throw SettingsError(fmt::format("{} {}: longer than 4096 bytes", what, path));
  std::ifstream file(path, std::ios::binary);
  if (!file) throw SettingsError(fmt::format("{} {}: cannot read: {}", what, path, std::strerror(errno)));
  std::string secret;
  secret.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (secret.ends_with('\n')) secret.pop_back();
  if (secret.ends_with('\r')) secret.pop_back();
  if (secret.empty()) throw SettingsError(fmt::format("{} {}: empty", what, path));
  if (secret.size() > 4096) throw SettingsError(fmt::format("{} {}: longer than 4096 bytes", what, path));
  return secret;
}

void resolve_coordinator_password(Settings& settings) {
  // Every command reads the coordinator through its backend: one that
  // names none is refused here, whatever gives the password.
  const Backend& backend = backend_for(settings.coordinator);
  std::string password;
  std::string source;
  if (!settings.coordinator_password_file.empty()) {
    password = read_secret_file(settings.coordinator_password_file, "coordinator password file");
    source = "coordinator password file " + settings.coordinator_password_file;
  } else {
    const std::string name(backend.password_variable());
    const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return;
    password = value;
    source = name;
  }
  const auto scheme = settings.coordinator.find("://");
  const auto at = settings.coordinator.rfind('@', settings.coordinator.find('?'));  // not an '@' in the query
  if (scheme != std::string::npos && at != std::string::npos && at > scheme &&
      settings.coordinator.substr(scheme + 3, at - scheme - 3).find(':') != std::string::npos) {
    // Without the query too: it may hold other secrets (sentinel_password).
    const std::string shown = without_userinfo(settings.coordinator.substr(0, settings.coordinator.find('?')));
    throw SettingsError(fmt::format("coordinator {} has a password and {} gives one too: keep one", shown, source));
  }
  settings.coordinator_password = std::move(password);
}

bool is_zero_duration(std::string_view text) noexcept {
  try {
    return parse_duration(text) == std::chrono::nanoseconds::zero();
  } catch (...) {
    return false;
  }
}

std::chrono::nanoseconds default_max_clock_skew(std::chrono::nanoseconds claim_ttl) {
  return std::min<std::chrono::nanoseconds>(std::chrono::seconds{5}, claim_ttl / 4);
}

std::chrono::nanoseconds max_clock_skew(const Settings& settings) {
  return settings.max_clock_skew.value_or(default_max_clock_skew(settings.claim_ttl));
}

void validate(const Settings& settings) {
  if (!settings.replica_id.empty()) {
    const bool printable = std::all_of(settings.replica_id.begin(), settings.replica_id.end(),
                                       [](unsigned char c) { return c > 0x20 && c < 0x7f; });
    if (settings.replica_id.size() > 64 || !printable) {
      throw SettingsError(fmt::format("replica id \"{}\": 1 to 64 printable characters without blanks",
                                      settings.replica_id.substr(0, 80)));
    }
  }
  if (settings.jobs_paths.empty()) {
    throw SettingsError("no jobs file: give one or more files or directories as arguments, or jobs = \"…\" (or a list) "
                        "in the config");
  }
  if (settings.keep_succeeded > max_kept_runs || settings.keep_failed > max_kept_runs) {
    throw SettingsError(fmt::format("keep_succeeded {}, keep_failed {}: each at most {}", settings.keep_succeeded,
                                    settings.keep_failed, max_kept_runs));
  }
  if (!settings.output_dir.empty() && settings.output_dir.front() != '/') {
    throw SettingsError(fmt::format("output dir \"{}\": an absolute path, or none", settings.output_dir));
  }
  const Backend& backend = backend_for(settings.coordinator);  // names every form it takes if none
  // Fires older than the claimer's dedup window (half the TTL) are skipped
  // as stale: below 2 s a fire's ordinary lateness would eat it.
  if (settings.claim_ttl < std::chrono::seconds{2}) {
    throw SettingsError(fmt::format("claim TTL {} is below 2s: fires older than half of it are not claimed (stale)",
                                    format_duration(settings.claim_ttl)));
  }
  if (settings.max_clock_skew &&
      (*settings.max_clock_skew <= std::chrono::nanoseconds::zero() ||
       *settings.max_clock_skew >= settings.claim_ttl - *settings.max_clock_skew)) {
    throw SettingsError(fmt::format("max clock skew {}: must be positive and below half the claim TTL {} ({})",
                                    format_duration(*settings.max_clock_skew), format_duration(settings.claim_ttl),
                                    format_duration(settings.claim_ttl / 2)));
  }
  if (settings.require_noeviction && !backend.checks_config()) {
    throw SettingsError("require_noeviction: only a Redis coordinator has a maxmemory-policy");
  }
  if (!settings.http.empty()) (void)parse_listen_address(settings.http);
  // The lease is renewed every TTL/3: below a second the keep-alive would
  // spin and any scheduling hiccup would lose leadership.
  if (settings.leader_ttl && *settings.leader_ttl < min_leader_ttl) {
    throw SettingsError(fmt::format("leader TTL {} is below the minimum of {}", format_duration(*settings.leader_ttl),
                                    format_duration(min_leader_ttl)));
  }
}

}  // namespace fleetcron::daemon
