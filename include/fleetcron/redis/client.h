// fleetcron::redis — a small, thread-safe Redis client over hiredis 0.14:
// a connection pool with timeouts that survive reconnects, capped reconnect
// backoff, AUTH (password or ACL user), SELECT, pipelining and scripts by
// SHA with a fallback on NOSCRIPT. Passwords never appear in messages.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/backend_error.h"
#include "fleetcron/uri_error.h"

namespace fleetcron::redis {

/// Where and how to connect. Build it by hand or with parse_uri().
struct ClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  /// Non-empty: connect to this Unix socket instead of host:port.
  std::string unix_socket;
  /// ACL user for `AUTH user password`; empty: `AUTH password` (or none).
  std::string user;
  /// Empty: no AUTH. Never printed.
  std::string password;
  /// SELECTed after every (re)connect, 0 .. 2^31-1.
  int database = 0;
  /// Bounds connecting (TCP handshake plus AUTH/SELECT), 1 ms .. 1 h.
  std::chrono::milliseconds connect_timeout{1000};
  /// Bounds every read and write of a command, 1 ms .. 1 h; applied again
  /// after every reconnect (hiredis forgets it).
  std::chrono::milliseconds request_timeout{1000};
  /// Connections kept open at most, 1 .. 1024. A caller waits for a free one
  /// for at most request_timeout.
  std::size_t pool_size = 4;
  /// After a failed connect, further connects wait this long, doubling per
  /// failure up to reconnect_backoff_max; calls during the wait fail at once.
  std::chrono::milliseconds reconnect_backoff_initial{50};
  std::chrono::milliseconds reconnect_backoff_max{2000};
};

/// Parses
///   redis://[user[:password]@]host[:port][/db][?option=value&...]
///   unix:PATH[?option=value&...]      unix://[user[:password]@]PATH[?...]
/// onto `base` (defaults for what the URI leaves out). host may be a name,
/// an IPv4 address or [IPv6]; user and password are percent-decoded.
/// Options: db (unix), connect_timeout, request_timeout (command_timeout is
/// accepted for it too; durations such as
/// 500ms), pool_size, password and user (unix). rediss:// is refused:
/// hiredis 0.14 has no TLS. Throws UriError.
[[nodiscard]] ClientOptions parse_uri(std::string_view uri, ClientOptions base = {});

/// "redis://user:***@host:port/db" or "unix:/path": for logs, no secrets.
[[nodiscard]] std::string describe(const ClientOptions& options);

/// Throws std::invalid_argument naming the field and value.
void validate(const ClientOptions& options);

/// One reply, decoded.
struct Reply {
  enum class Type { nil, status, error, integer, string, array };
  Type type = Type::nil;
  std::string text;  // status, error and string replies
  long long integer = 0;
  std::vector<Reply> elements;  // array replies

  [[nodiscard]] bool is_error() const noexcept { return type == Type::error; }
  [[nodiscard]] bool is_nil() const noexcept { return type == Type::nil; }
  /// An error reply whose code (first word) is `code`, e.g. "NOSCRIPT".
  [[nodiscard]] bool is_error(std::string_view code) const noexcept;
};
[[nodiscard]] std::string_view to_string(Reply::Type type) noexcept;

/// A Lua script, called by SHA1 (EVALSHA) once the server has it. The SHA
/// is learnt from SCRIPT LOAD on first use; a NOSCRIPT answer (script
/// cache flushed, server restarted) falls back to EVAL, which loads it again.
class Script {
 public:
  explicit Script(std::string source) : source_(std::move(source)) {}
  [[nodiscard]] const std::string& source() const noexcept { return source_; }

 private:
  friend class Client;
  std::string source_;
  mutable std::mutex mutex_;  // guards sha_
  mutable std::string sha_;
};

/// Counters since construction, for metrics.
struct ClientStats {
  std::uint64_t commands = 0;          // commands sent (each command of a pipeline counts)
  std::uint64_t failures = 0;          // calls that threw BackendError
  std::uint64_t connects = 0;          // successful (re)connects
  std::uint64_t connect_failures = 0;  // failed connects
};

namespace detail {
class Connection;
}

/// Thread-safe: every call borrows a pooled connection. Connects lazily, on
/// first use; a broken connection is dropped and the next call reconnects.
class Client {
 public:
  /// Validates the options (std::invalid_argument); does not connect.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends one command, arguments binary-safe. Throws BackendError.
  Reply command(std::span<const std::string> args);
  Reply command(std::initializer_list<std::string_view> args);

  /// Sends all commands, then reads all replies: one round trip. Throws
  /// Error if the connection fails (then some commands may have run).
  std::vector<Reply> pipeline(std::span<const std::vector<std::string>> commands);

  /// EVALSHA with a fallback to EVAL on NOSCRIPT. Throws BackendError.
  Reply eval(const Script& script, std::span<const std::string> keys, std::span<const std::string> args);

  /// One script call per element of `calls` (its KEYS then its ARGV; the
  /// first key_counts[i] are keys), pipelined; calls answered NOSCRIPT are
  /// sent again with EVAL, so the result is as if the script was always there.
  std::vector<Reply> eval_pipeline(const Script& script, std::span<const std::size_t> key_counts,
                                   std::span<const std::vector<std::string>> calls);

  /// PING; throws BackendError if the server cannot be reached.
  void ping();

  [[nodiscard]] const ClientOptions& options() const noexcept { return options_; }
  /// describe(options()).
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] ClientStats stats() const noexcept;

 private:
  class Lease;
  std::unique_ptr<detail::Connection> checkout();
  void checkin(std::unique_ptr<detail::Connection> connection);
  std::unique_ptr<detail::Connection> connect();
  std::string script_sha(const Script& script);

  ClientOptions options_;
  std::string description_;
  std::mutex mutex_;  // guards the members below
  std::condition_variable returned_;
  std::vector<std::unique_ptr<detail::Connection>> idle_;
  std::size_t open_ = 0;  // idle plus lent out plus connecting
  std::chrono::steady_clock::time_point next_connect_at_{};
  std::chrono::milliseconds backoff_{0};
  std::string last_connect_error_;

  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> connect_failures_{0};
};

}  // namespace fleetcron::redis
