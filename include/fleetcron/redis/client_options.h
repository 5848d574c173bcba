// fleetcron::redis — how to reach a Redis server: the client options,
// their check and their description without secrets.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fleetcron/api.h"

namespace fleetcron::redis {

/// Where one Redis Sentinel listens.
struct FLEETCRON_API SentinelAddress {
  std::string host;
  std::uint16_t port = 26379;
};

/// Where and how to connect. Build it by hand or with parse_uri(uri).connection.
struct FLEETCRON_API ClientOptions {
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
  /// Bounds the TCP connect and TLS handshake (shared by the addresses a
  /// name resolves to), then each wait of AUTH and SELECT, 1 ms .. 1 h.
  std::chrono::milliseconds connect_timeout{1000};
  /// Bounds each wait for the socket while a command is written or its
  /// reply read, 1 ms .. 1 h.
  std::chrono::milliseconds request_timeout{1000};
  /// Connections kept open at most, 1 .. 1024. A caller waits for a free one
  /// for at most request_timeout.
  std::size_t pool_size = 4;
  /// After a failed connect, further connects wait this long, doubling per
  /// failure up to reconnect_backoff_max; calls during the wait fail at once.
  std::chrono::milliseconds reconnect_backoff_initial{50};
  std::chrono::milliseconds reconnect_backoff_max{2000};

  /// TLS (rediss://) over TCP, on OpenSSL: the server's certificate and
  /// name are verified unless tls_verify is false.
  bool tls = false;
  /// PEM file of the CAs to trust; with tls_ca_dir empty too, the system's
  /// default store (/etc/ssl/certs).
  std::string tls_ca_file;
  /// Directory of CA certificates by subject hash (c_rehash/openssl rehash).
  std::string tls_ca_dir;
  /// Client certificate chain (PEM) and its private key, for servers that
  /// ask for one (tls-auth-clients); both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  /// The name the certificate must carry (and the SNI sent); empty: host.
  std::string tls_server_name;
  /// false: any certificate, any name is accepted (anyone on the path can
  /// impersonate the server). Off only when asked; describe() shows it.
  bool tls_verify = true;

  /// Sentinel: when not empty, host and port are not used; the client asks
  /// these sentinels (in turn, the last one that answered first) for the
  /// primary of sentinel_master, checks ROLE after connecting, and asks
  /// again after a lost connection, a refused connect or a READONLY reply
  /// (pooled connections to the former primary are then dropped). With
  /// tls, the sentinels are reached over TLS too.
  std::vector<SentinelAddress> sentinels;
  std::string sentinel_master;
  /// AUTH to the sentinels (their requirepass or an ACL user); user and
  /// password are the primary's. Empty: no AUTH. Never printed.
  std::string sentinel_user;
  std::string sentinel_password;
};

/// "redis://user:***@host:port/db" or "unix:/path": for logs, no secrets.
[[nodiscard]] FLEETCRON_API std::string describe(const ClientOptions& options);

/// Throws std::invalid_argument naming the field and value.
FLEETCRON_API void validate(const ClientOptions& options);

}  // namespace fleetcron::redis
