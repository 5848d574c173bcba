// Internal: one connection to Redis — our transport (TCP, Unix socket or
// TLS) under hiredis's command formatter and reply reader. Not
// thread-safe; the Client's pool lends each connection to one caller at a
// time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fleetcron/backend_error.h"
#include "fleetcron/redis/client_options.h"
#include "redis/reply.h"

struct redisReader;
struct redisReply;

namespace fleetcron::redis::detail {

/// Decodes a hiredis reply tree (does not free it).
Reply decode(const redisReply& reply);

class TlsContext;
class Transport;

class Connection {
 public:
  /// Connects (with TLS when `tls` is not null), AUTHs and SELECTs, all
  /// within the connect timeout; throws BackendError. `description` (no
  /// secrets, outlives the connection) prefixes messages.
  Connection(const ClientOptions& options, const TlsContext* tls, const std::string& description);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Throws Error and marks the connection broken on I/O failure.
  Reply command(std::span<const std::string> args);
  std::vector<Reply> pipeline(std::span<const std::vector<std::string>> commands);

  /// After an I/O error or timeout the connection cannot be used again.
  [[nodiscard]] bool broken() const noexcept { return broken_; }
  /// Marks it unusable (e.g. it reached a demoted primary).
  void discard() noexcept { broken_ = true; }

  /// The Client's bookkeeping: which sentinel-named primary it reaches.
  std::uint64_t pool_generation = 0;

 private:
  void append(std::span<const std::string> args);  // formats into outgoing_
  void flush();                                     // writes outgoing_
  Reply read();

  struct FreeReader {
    void operator()(redisReader* reader) const noexcept;
  };
  const std::string& description_;
  std::unique_ptr<redisReader, FreeReader> reader_;
  std::unique_ptr<Transport> transport_;
  std::string outgoing_;
  bool broken_ = false;
};

}  // namespace fleetcron::redis::detail
