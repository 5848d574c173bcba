#include "nats/status.h"

#include <fmt/format.h>

namespace fleetcron::nats::detail {

Error error(natsStatus status, const std::string& what) {
  std::string text = natsStatus_GetText(status);
  if (status == NATS_ERR) {
    natsStatus last = NATS_OK;
    const char* detail = nats_GetLastError(&last);
    if (detail != nullptr && *detail != '\0') text = detail;
  }
  return Error(static_cast<int>(status), fmt::format("{}: {} (status {})", what, text, static_cast<int>(status)));
}

bool is_wrong_last_sequence(natsStatus status) {
  if (status != NATS_ERR) return false;
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  return detail != nullptr && std::string_view(detail).find("wrong last sequence") != std::string_view::npos;
}

}  // namespace fleetcron::nats::detail
