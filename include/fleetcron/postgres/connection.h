// fleetcron::postgres::Connection — a small pool of libpq connections to one
// PostgreSQL server, every statement bounded in time on both ends: the
// server's statement_timeout and a client-side deadline (a paused or
// unreachable server cannot block a caller longer than that).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "fleetcron/api.h"

namespace fleetcron::postgres {

/// libtnb/cron's postgrescoord bounds every statement by 5 s.
inline constexpr std::chrono::milliseconds default_statement_timeout{5000};
inline constexpr std::chrono::milliseconds default_connect_timeout{5000};

struct FLEETCRON_API ConnectionOptions {
  /// A postgres:// or postgresql:// URI with libpq's parameters (host, port,
  /// dbname, user, password, sslmode, sslrootcert, passfile, …), as
  /// libpq's documentation describes them. A password in it is never
  /// printed; PGPASSWORD and the passfile work as for psql.
  std::string uri = "postgres://localhost/postgres";
  /// Overrides the URI's password when not empty (never printed).
  std::string password;
  /// Bounds connecting (TCP, TLS and authentication), 1 ms .. 1 h.
  std::chrono::milliseconds connect_timeout = default_connect_timeout;
  /// Bounds every statement, 1 ms .. 1 h: sent as the session's
  /// statement_timeout, and the client gives up 1 s after it (the
  /// connection is then dropped).
  std::chrono::milliseconds statement_timeout = default_statement_timeout;
  /// Connections kept open, 1 .. 64; a caller waits for a free one at
  /// most statement_timeout.
  std::size_t pool_size = 4;
  /// What pg_stat_activity shows for these connections.
  std::string application_name = "fleetcron";
};

/// "postgres://user@host:port/dbname" (plus sslmode when set), no password.
[[nodiscard]] FLEETCRON_API std::string describe(const ConnectionOptions& options);
/// Throws std::invalid_argument naming the field and value (a URI libpq
/// cannot parse, a scheme other than postgres:// or postgresql://, a bound
/// out of range).
FLEETCRON_API void validate(const ConnectionOptions& options);

namespace detail {
class Pool;
}

/// Thread-safe. Connects lazily (on the first statement) and again after
/// a failure; failures throw BackendError (connect, auth, timeout, io,
/// protocol), never with the password in the message.
class FLEETCRON_API Connection {
 public:
  /// Throws std::invalid_argument (validate()).
  explicit Connection(ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] const ConnectionOptions& options() const noexcept;
  /// describe(options()).
  [[nodiscard]] const std::string& describe() const noexcept;
  /// One round trip (SELECT 1); throws BackendError.
  void ping();

  /// For the backend's own classes.
  [[nodiscard]] detail::Pool& pool() noexcept;

 private:
  ConnectionOptions options_;
  std::string description_;
  std::unique_ptr<detail::Pool> pool_;
};

}  // namespace fleetcron::postgres
