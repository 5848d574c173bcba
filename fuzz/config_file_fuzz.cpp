// Fuzzes the TOML config file: any bytes either apply (and the settings
// then validate or fail with a SettingsError) or fail with a SettingsError
// naming the file — never another exception, a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/config/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fleetcron::daemon;
  if (size > 64 * 1024) return 0;  // a config file is small; toml++ is linear anyway
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  Settings settings;
  try {
    apply_config_text(text, "fuzz.toml", settings);
  } catch (const SettingsError& e) {
    if (std::string_view(e.what()).substr(0, 9) != "fuzz.toml") __builtin_trap();  // always names the file
    return 0;
  }
  try {
    validate(settings);
  } catch (const SettingsError&) {
  }
  return 0;
}
