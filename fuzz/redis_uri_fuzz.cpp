// Fuzzes redis::parse_uri(): any input either parses to valid options or
// throws UriError; the message never contains a password it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fleetcron/redis/client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view uri(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  try {
    const auto options = fleetcron::redis::parse_uri(uri);
    fleetcron::redis::validate(options);  // whatever parses is valid
    const std::string text = fleetcron::redis::describe(options);
    if (options.password.size() >= 8 && text.find(options.password) != std::string::npos &&
        options.host.find(options.password) == std::string::npos &&
        options.username.find(options.password) == std::string::npos &&
        options.unix_socket.find(options.password) == std::string::npos) {
      __builtin_trap();  // describe() leaked the password
    }
  } catch (const fleetcron::redis::UriError& e) {
    const std::string message = e.what();
    // A long, distinctive password between ':' and '@' must not be echoed.
    const auto colon = uri.find(':', 8);
    const auto at = uri.find('@');
    if (uri.starts_with("redis://") && colon != std::string_view::npos && at != std::string_view::npos && colon < at &&
        at - colon > 12) {
      const std::string_view password = uri.substr(colon + 1, at - colon - 1);
      if (password.find_first_of("/?%[]:@") == std::string_view::npos && message.find(password) != std::string::npos &&
          uri.substr(at).find(password) == std::string_view::npos && uri.substr(0, colon).find(password) == std::string_view::npos) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
