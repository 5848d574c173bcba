#include "nats/status.h"

#include <fmt/format.h>

namespace fleetcron::nats::detail {

BackendError::Kind kind_of(natsStatus status) noexcept {
  switch (status) {
    case NATS_TIMEOUT: return BackendError::Kind::timeout;
    case NATS_NO_SERVER:
    case NATS_NOT_YET_CONNECTED:
    case NATS_CONNECTION_DISCONNECTED: return BackendError::Kind::connect;
    case NATS_IO_ERROR:
    case NATS_STALE_CONNECTION: return BackendError::Kind::io;
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED: return BackendError::Kind::auth;
    case NATS_CONNECTION_CLOSED: return BackendError::Kind::closed;
    default: return BackendError::Kind::protocol;
  }
}

std::string describe_status(natsStatus status, const std::string& what) {
  std::string text = natsStatus_GetText(status);
  if (status == NATS_ERR || status == NATS_SSL_ERROR) {
    natsStatus last = NATS_OK;
    const char* detail = nats_GetLastError(&last);
    if (detail != nullptr && *detail != '\0') text = detail;
  }
  return fmt::format("{}: {} (status {})", what, text, static_cast<int>(status));
}

void raise(natsStatus status, const std::string& what) {
  BackendError::Kind kind = kind_of(status);
  // A server certificate that does not verify is this configuration's
  // fault (a CA, a name), not the network's: trying again cannot fix it.
  // nats.c writes a verification failure as "SSL handshake error:
  // <X509 code>:<reason>:depth=…:cert=…".
  const std::string detail = status == NATS_SSL_ERROR ? last_error_text() : std::string();
  if (detail.find("SSL handshake error") != std::string::npos && detail.find("depth=") != std::string::npos) {
    kind = BackendError::Kind::config;
  }
  throw_backend_error(kind, describe_status(status, what), static_cast<int>(status));
}

void raise_missing(const std::string& what) {
  throw_backend_error(BackendError::Kind::protocol, what, static_cast<int>(NATS_NO_RESPONDERS));
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
