// Internal: the byte stream to one Redis server — TCP, a Unix socket or
// TLS over TCP (OpenSSL) — on a non-blocking socket whose every wait is
// bounded: connecting (TCP and TLS handshakes) by one deadline, then each
// wait for the socket to become readable or writable by the I/O timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "fleetcron/redis/client_options.h"

struct ssl_st;
struct addrinfo;

namespace fleetcron::redis::detail {

class TlsContext;

class Transport {
 public:
  /// Connects to options' host:port or unix_socket, then (with `tls`)
  /// handshakes and verifies; throws ConnectError naming what failed (a
  /// refused certificate says why). `description` prefixes messages.
  Transport(const ClientOptions& options, const TlsContext* tls, const std::string& description,
            std::chrono::milliseconds connect_timeout);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  /// Bounds each later wait for the socket.
  void set_io_timeout(std::chrono::milliseconds timeout) noexcept { io_timeout_ = timeout; }

  /// Writes all of `data`. Throws IoError, or TimeoutError when the socket
  /// stays unwritable for the I/O timeout; `what` names the step.
  void write(std::string_view data, std::string_view what);
  /// Reads at least one byte, at most `capacity`. Throws IoError (also when
  /// the server closed the connection) or TimeoutError.
  std::size_t read(char* buffer, std::size_t capacity, std::string_view what);

 private:
  void connect_socket(const ClientOptions& options, std::chrono::steady_clock::time_point deadline);
  void connect_tcp(const ClientOptions& options, std::chrono::steady_clock::time_point deadline);
  /// One address until `deadline`: "" with fd_ connected, else why not (fd_ closed).
  std::string try_address(const addrinfo& address, std::chrono::steady_clock::time_point deadline);
  void handshake(const ClientOptions& options, const TlsContext& tls, std::chrono::steady_clock::time_point deadline);
  /// Waits for `events` (poll(2) bits) until `deadline`; false on timeout.
  bool wait(short events, std::chrono::steady_clock::time_point deadline) const;
  /// After an SSL_read/SSL_write returned `result`: waits for the socket
  /// if OpenSSL wants it (the call is then retried), else throws.
  void await_tls(int result, std::chrono::steady_clock::time_point deadline, std::string_view what);
  [[noreturn]] void fail_io(std::string_view what, int error) const;
  [[noreturn]] void fail_timeout(std::string_view what) const;

  const std::string& description_;
  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  std::chrono::milliseconds io_timeout_{1000};
};

}  // namespace fleetcron::redis::detail
