// fleetcron::redis::Client — the connection to Redis that the claimer and
// the elector share: a thread-safe pool over hiredis 0.14 with timeouts
// that survive reconnects, capped reconnect backoff, AUTH (password or ACL
// user) and SELECT. Passwords never appear in messages. The commands it
// sends are the library's own business; its API is where to connect,
// whether the server answers, and counters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/backend_error.h"
#include "fleetcron/redis/client_options.h"
#include "fleetcron/redis/uri.h"

namespace fleetcron::redis {

/// Counters since construction, for metrics.
struct FLEETCRON_API ClientStats {
  std::uint64_t commands = 0;          // commands sent (each command of a pipeline counts)
  std::uint64_t failures = 0;          // calls that threw BackendError
  std::uint64_t connects = 0;          // successful (re)connects
  std::uint64_t connect_failures = 0;  // failed connects
};

/// Thread-safe: every call borrows a pooled connection. Connects lazily, on
/// first use; a broken connection is dropped and the next call reconnects.
class FLEETCRON_API Client {
 public:
  /// Validates the options (std::invalid_argument); does not connect.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// PING; throws BackendError if the server cannot be reached or refuses.
  void ping();

  [[nodiscard]] const ClientOptions& options() const noexcept;
  /// describe(options()).
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] ClientStats stats() const noexcept;

  /// The pool and the command API, defined in src/redis/commands.h: the
  /// library's own, not installed and not part of the API.
  class Impl;
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::redis
