// fleetcron — the one error type of the coordination backends (Redis,
// NATS, and the backends to come), modelled on redis-plus-plus's errors.h.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/error.h"

namespace fleetcron {

/// A backend could not do what was asked. Outcomes that are part of
/// coordination (a fire claimed elsewhere, another replica leading) are
/// results, never exceptions; Claimers and Electors turn these errors into
/// failed results (fail closed). Catch BackendError for every kind, or the
/// subclass of one kind.
class FLEETCRON_API BackendError : public std::runtime_error, public Error {
 public:
  [[nodiscard]] const char* what() const noexcept override { return std::runtime_error::what(); }
  enum class Kind {
    connect,   ///< could not connect (refused, unreachable, DNS, connect timeout), or backing off after a failure
    timeout,   ///< no answer within the request timeout (or no free pooled connection)
    io,        ///< the connection broke (closed by the server, reset)
    auth,      ///< authentication or authorization refused (Redis AUTH/SELECT, NATS credentials or permissions)
    protocol,  ///< the server answered with an error the operation cannot use, or a malformed reply
    closed,    ///< the connection was closed by its owner
    config,    ///< the server refuses this configuration for good: an unknown database, a certificate that does not verify
  };
  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  /// The backend's own code: nats.c's natsStatus for NATS, 0 for Redis.
  [[nodiscard]] int code() const noexcept { return code_; }

 protected:
  BackendError(Kind kind, const std::string& message, int code)
      : std::runtime_error(message), kind_(kind), code_(code) {}

 private:
  Kind kind_;
  int code_;
};

class FLEETCRON_API ConnectError final : public BackendError {
 public:
  explicit ConnectError(const std::string& message, int code = 0) : BackendError(Kind::connect, message, code) {}
};
class FLEETCRON_API TimeoutError final : public BackendError {
 public:
  explicit TimeoutError(const std::string& message, int code = 0) : BackendError(Kind::timeout, message, code) {}
};
class FLEETCRON_API IoError final : public BackendError {
 public:
  explicit IoError(const std::string& message, int code = 0) : BackendError(Kind::io, message, code) {}
};
class FLEETCRON_API AuthError final : public BackendError {
 public:
  explicit AuthError(const std::string& message, int code = 0) : BackendError(Kind::auth, message, code) {}
};
class FLEETCRON_API ProtocolError final : public BackendError {
 public:
  explicit ProtocolError(const std::string& message, int code = 0) : BackendError(Kind::protocol, message, code) {}
};
class FLEETCRON_API ClosedError final : public BackendError {
 public:
  explicit ClosedError(const std::string& message, int code = 0) : BackendError(Kind::closed, message, code) {}
};

class FLEETCRON_API ConfigError final : public BackendError {
 public:
  explicit ConfigError(const std::string& message, int code = 0) : BackendError(Kind::config, message, code) {}
};

/// "connect", "timeout", "io", "auth", "protocol", "closed", "config".
[[nodiscard]] FLEETCRON_API std::string_view to_string(BackendError::Kind kind) noexcept;

/// Throws the subclass for `kind`.
[[noreturn]] FLEETCRON_API void throw_backend_error(BackendError::Kind kind, const std::string& message, int code = 0);

}  // namespace fleetcron
