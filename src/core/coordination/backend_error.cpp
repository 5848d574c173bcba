#include "fleetcron/backend_error.h"

namespace fleetcron {

std::string_view to_string(BackendError::Kind kind) noexcept {
  switch (kind) {
    case BackendError::Kind::connect: return "connect";
    case BackendError::Kind::timeout: return "timeout";
    case BackendError::Kind::io: return "io";
    case BackendError::Kind::auth: return "auth";
    case BackendError::Kind::protocol: return "protocol";
    case BackendError::Kind::closed: return "closed";
    case BackendError::Kind::config: return "config";
  }
  return "unknown";
}

void throw_backend_error(BackendError::Kind kind, const std::string& message, int code) {
  switch (kind) {
    case BackendError::Kind::connect: throw ConnectError(message, code);
    case BackendError::Kind::timeout: throw TimeoutError(message, code);
    case BackendError::Kind::io: throw IoError(message, code);
    case BackendError::Kind::auth: throw AuthError(message, code);
    case BackendError::Kind::protocol: throw ProtocolError(message, code);
    case BackendError::Kind::closed: throw ClosedError(message, code);
    case BackendError::Kind::config: throw ConfigError(message, code);
  }
  throw ProtocolError(message, code);
}

}  // namespace fleetcron
