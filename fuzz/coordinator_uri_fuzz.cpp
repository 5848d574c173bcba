// Fuzzes coordinator URIs as the daemon takes them (--coordinator or the
// config's `coordinator`): the settings check, then the URI parser of the
// backend it names. Every failure is an exception the daemon reports — and no
// message may contain the URI's password.
//
// A password "leaks" when it flows into the message: the URI is parsed a
// second time with every letter and digit of the password shifted (a→b,
// 9→0, …). It is a leak when the password occurs more often in the first
// message than in the second, and the shifted one more often in the second
// than in the first. Text that merely looks like either — the fuzzer is
// good at planting it, in user names or option values that are shown by
// design — occurs equally often in both.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "daemon/run/coordination_setup.h"
#include "daemon/config/settings.h"

namespace {

struct Secret {
  std::size_t at = 0;
  std::size_t size = 0;
};

// Where the password of scheme://user:password@host… is, if the URI has a
// real scheme ([a-z][a-z0-9+.-]*; "unix:/path" has none) and userinfo.
std::optional<Secret> secret_of(std::string_view uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string_view::npos || scheme == 0 || !std::islower(static_cast<unsigned char>(uri[0]))) return {};
  for (const char c : uri.substr(0, scheme)) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::islower(u) && !std::isdigit(u) && c != '+' && c != '.' && c != '-') return {};
  }
  const std::size_t start = scheme + 3;
  const auto at = uri.rfind('@');
  if (at == std::string_view::npos || at < start) return {};
  const auto colon = uri.find(':', start);
  if (colon == std::string_view::npos || colon > at || at - colon - 1 < 4) return {};
  // "user:" comes before any '/' or '?' (user names have neither; the
  // password after it may, and must still stay secret).
  if (uri.substr(start, colon - start).find_first_of("/?") != std::string_view::npos) return {};
  return Secret{colon + 1, at - colon - 1};
}

std::string shifted(std::string text, Secret secret) {
  for (std::size_t i = secret.at; i < secret.at + secret.size; ++i) {
    char& c = text[i];
    if (c >= 'a' && c <= 'z') c = c == 'z' ? 'a' : static_cast<char>(c + 1);
    else if (c >= 'A' && c <= 'Z') c = c == 'Z' ? 'A' : static_cast<char>(c + 1);
    else if (c >= '0' && c <= '9') c = c == '9' ? '0' : static_cast<char>(c + 1);
  }
  return text;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The message the daemon would print for `uri`, or nothing if it is accepted.
std::optional<std::string> message_for(const std::string& uri) {
  using namespace fleetcron;
  daemon::Settings settings;
  settings.jobs_paths = {"jobs.cron"};  // so validate() reaches the coordinator
  settings.coordinator = uri;
  try {
    daemon::validate(settings);
    // The backend the URI names parses it as a replica would (claim mode:
    // every part of the URI is read), without connecting.
    settings.coordination = daemon::CoordinationMode::claim;
    (void)daemon::make_offline_claimer(settings);
  } catch (const daemon::SettingsError& e) {
    return e.what();
  } catch (const std::invalid_argument& e) {  // the URI parsers, redis::UriError included
    return e.what();
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string uri(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  const auto message = message_for(uri);
  const auto secret = secret_of(uri);
  if (!message || !secret) return 0;
  const std::string password = uri.substr(secret->at, secret->size);
  if (message->find(password) == std::string::npos) return 0;
  const std::string other_uri = shifted(uri, *secret);
  const std::string other_password = other_uri.substr(secret->at, secret->size);
  if (other_password == password) return 0;  // nothing to tell them apart by
  const std::string other_message = message_for(other_uri).value_or("");
  if (count(*message, password) > count(other_message, password) &&
      count(other_message, other_password) > count(*message, other_password)) {
    __builtin_trap();  // the password flowed into the message
  }
  return 0;
}
