// Fuzzes what fleetcron does with values a NATS server hands back: a
// leader record as `fleetcron status` shows it (one escaped line, whatever
// the bytes), and fire keys encoded into KV keys (always a valid NATS key,
// and two different fire keys never share one). Input: one operation
// byte, eight revision bytes, then the value.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "daemon/backends/nats_backend.h"
#include "fleetcron/nats/coordination.h"
#include "nats/keys.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fleetcron;
  if (size < 9 || size > 64 * 1024) return 0;
  nats::Entry entry;
  entry.key = "leader";
  entry.operation = static_cast<nats::Entry::Operation>(data[0] % 3);
  std::memcpy(&entry.revision, data + 1, sizeof entry.revision);
  entry.value.assign(reinterpret_cast<const char*>(data + 9), size - 9);  // NOLINT: libFuzzer's bytes

  const std::string line = daemon::describe_leader_record(entry);
  if (line.empty() || line.back() != '\n') __builtin_trap();
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c == 0x7F) __builtin_trap();  // no forged lines, no terminal control sequences
    const auto next = i + 1 < line.size() ? static_cast<unsigned char>(line[i + 1]) : 0;
    const auto third = i + 2 < line.size() ? static_cast<unsigned char>(line[i + 2]) : 0;
    if (c == 0xC2 && next >= 0x80 && next <= 0x9F) __builtin_trap();  // C1 controls (CSI)
    if (c == 0xE2 && ((next == 0x80 && third >= 0xA8 && third <= 0xAE) || (next == 0x81 && third >= 0xA6 && third <= 0xA9))) {
      __builtin_trap();  // line separators, bidirectional overrides
    }
  }

  const std::string encoded = nats::encode_key(entry.value);
  if (!entry.value.empty() && !nats::detail::valid_key(encoded)) __builtin_trap();
  const std::string_view value = entry.value;
  const std::string_view a = value.substr(0, value.size() / 2), b = value.substr(value.size() / 2);
  if (a != b && nats::encode_key(a) == nats::encode_key(b)) __builtin_trap();  // injective
  return 0;
}
