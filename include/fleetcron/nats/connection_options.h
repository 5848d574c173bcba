// fleetcron::nats — how to reach a NATS server: the connection options,
// their check and their description without secrets.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "fleetcron/api.h"

namespace fleetcron::nats {

struct FLEETCRON_API TlsOptions {
  bool enabled = false;   ///< also implied by a tls:// server URL
  std::string ca_file;    ///< trusted CAs (PEM); empty: the system's
  std::string cert_file;  ///< client certificate chain (PEM), with key_file
  std::string key_file;
};

inline constexpr std::chrono::milliseconds default_connect_timeout{2000};
inline constexpr std::chrono::milliseconds default_request_timeout{2000};

struct FLEETCRON_API ConnectionOptions {
  /// One or more server URLs (nats://host:port, tls://host:port); at least one.
  std::vector<std::string> servers{"nats://127.0.0.1:4222"};
  std::string user, password;    ///< user/password authentication (password never printed)
  std::string token;             ///< token authentication (never printed)
  std::string credentials_file;  ///< a .creds file (JWT + NKey seed)
  std::string nkey_seed_file;    ///< an NKey seed file (public key derived from it)
  TlsOptions tls;
  std::string name = "fleetcron";  ///< the connection name the server shows
  /// Bounds connecting, 1 ms .. 1 h.
  std::chrono::milliseconds connect_timeout = default_connect_timeout;
  /// Bounds every JetStream and KV request (jsOptions.Wait), 1 ms .. 1 h.
  /// A KV call cannot be cancelled: this is how long one can block.
  std::chrono::milliseconds request_timeout = default_request_timeout;
  /// Reconnect attempts per server after a disconnect; -1: forever.
  int max_reconnects = -1;
  std::chrono::milliseconds reconnect_wait{250};
  /// Bytes of publishes buffered while reconnecting and replayed after:
  /// small, so a write that timed out during an outage is rarely replayed
  /// minutes later. nats.c cannot disable the buffer (0 means 8 MB).
  int reconnect_buffer_bytes = 1;
};

/// "nats://host:port,…" plus the authentication method used, no secrets.
[[nodiscard]] FLEETCRON_API std::string describe(const ConnectionOptions& options);
/// Throws std::invalid_argument naming the field and value.
FLEETCRON_API void validate(const ConnectionOptions& options);

}  // namespace fleetcron::nats
