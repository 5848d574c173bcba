// libFuzzer target for the ledger's stored record (parse_fire_record()):
// the bytes come from a shared store, so anything may be there. A text
// that parses must format back to a record that parses to the same one,
// and passes the record checks once cut to its bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "fleetcron/fire_record.h"
#include "fleetcron/backend/record_formats.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto record = fleetcron::parse_fire_record(text);
  if (!record) return 0;
  const auto again = fleetcron::parse_fire_record(fleetcron::format_fire_record(*record));
  if (!again || !(*again == *record)) std::abort();
  try {
    fleetcron::check_fire_record(fleetcron::cut_fire_record(*record));
  } catch (const std::invalid_argument&) {
    // A record with a bad key or replica id is refused, never a crash.
  }
  return 0;
}
