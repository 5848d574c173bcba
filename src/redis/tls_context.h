// Internal: the OpenSSL context every TLS connection of one Client shares —
// the trusted CAs, the client certificate and the verification mode,
// loaded once, when the Client is built.
#pragma once

#include <memory>
#include <string>

#include "fleetcron/redis/client_options.h"

struct ssl_ctx_st;

namespace fleetcron::redis::detail {

class TlsContext {
 public:
  /// Loads what the tls_* options name; throws std::invalid_argument naming
  /// the option, the file and OpenSSL's reason.
  explicit TlsContext(const ClientOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  [[nodiscard]] ssl_ctx_st* get() const noexcept { return context_.get(); }

 private:
  struct Free {
    void operator()(ssl_ctx_st* context) const noexcept;
  };
  std::unique_ptr<ssl_ctx_st, Free> context_;
};

/// OpenSSL's queued errors as text ("" if none), and the queue cleared.
std::string take_openssl_errors();

}  // namespace fleetcron::redis::detail
