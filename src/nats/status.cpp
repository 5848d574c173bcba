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

std::string last_error_text() {
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  return detail != nullptr ? std::string(detail) : std::string();
}

bool is_wrong_last_sequence(natsStatus status) {
  return status == NATS_ERR && last_error_text().find("wrong last sequence") != std::string::npos;
}

}  // namespace fleetcron::nats::detail
