// Fuzzes redis::parse_uri(): any input either parses to valid options or
// throws UriError; the message never contains a password it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fleetcron/redis/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view uri(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  try {
    const auto options = fleetcron::redis::parse_uri(uri).connection;
    fleetcron::redis::validate(options);  // whatever parses is valid
    // describe() must not depend on the password's content.
    auto masked = options;
    masked.password.assign(options.password.size(), 'x');
    if (fleetcron::redis::describe(options) != fleetcron::redis::describe(masked)) __builtin_trap();
  } catch (const fleetcron::UriError& e) {
    // The message must not depend on the password's content: the same URI
    // with the password's bytes replaced must give the same message.
    if (!uri.starts_with("redis://")) return 0;
    const std::string_view authority = uri.substr(8, uri.substr(8).find_first_of("/?"));
    const auto at = authority.rfind('@');
    const auto colon = authority.find(':');
    if (at == std::string_view::npos || colon == std::string_view::npos || colon >= at) return 0;
    const std::string_view password = authority.substr(colon + 1, at - colon - 1);
    if (password.empty() || password.find('%') != std::string_view::npos) return 0;
    std::string masked(uri);
    masked.replace(8 + colon + 1, password.size(), std::string(password.size(), 'x'));
    std::string masked_message;
    try {
      (void)fleetcron::redis::parse_uri(masked);
    } catch (const fleetcron::UriError& again) {
      masked_message = again.what();
    }
    if (masked_message != e.what()) __builtin_trap();  // the message leaked the password
  }
  return 0;
}
