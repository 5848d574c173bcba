// Fuzzes coordinator URIs as the daemon takes them (--coordinator or the
// config's `coordinator`): the settings check, then the NATS or Redis URI
// parser. Every failure is an exception the daemon reports — and no
// message may contain the URI's password.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "daemon/coordination_setup.h"
#include "daemon/settings.h"
#include "fleetcron/redis/client.h"

namespace {

// The password of scheme://user:password@host…, if it appears exactly once
// in the URI and is long enough not to occur in a message by chance.
std::string secret_of(std::string_view uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string_view::npos) return {};
  const std::string_view rest = uri.substr(scheme + 3);
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) return {};
  const std::string_view userinfo = rest.substr(0, at);
  const auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) return {};
  const std::string password(userinfo.substr(colon + 1));
  if (password.size() < 6 || uri.find(password) != uri.rfind(password)) return {};
  return password;
}

void check_secret(const std::string& secret, const char* message) {
  if (!secret.empty() && std::string_view(message).find(secret) != std::string_view::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fleetcron;
  if (size > 4096) return 0;
  const std::string uri(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  const std::string secret = secret_of(uri);
  daemon::Settings settings;
  settings.jobs_file = "jobs.cron";  // so validate() reaches the coordinator
  settings.coordinator = uri;
  try {
    daemon::validate(settings);
  } catch (const daemon::SettingsError& e) {
    check_secret(secret, e.what());
    return 0;
  }
  try {
    if (uri.starts_with("nats://") || uri.starts_with("tls://")) {
      (void)daemon::parse_nats_uri(uri, settings);
    } else if (uri != "memory") {
      (void)redis::parse_uri(uri);
    }
  } catch (const std::invalid_argument& e) {
    check_secret(secret, e.what());
  }
  return 0;
}
