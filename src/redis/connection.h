// Internal: one hiredis context. Not thread-safe; the Client's pool lends
// each connection to one caller at a time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fleetcron/backend_error.h"
#include "fleetcron/redis/client_options.h"
#include "redis/reply.h"

struct redisContext;
struct redisReply;

namespace fleetcron::redis::detail {

/// Decodes a hiredis reply tree (does not free it).
Reply decode(const redisReply& reply);

class Connection {
 public:
  /// Connects, applies the command timeout, AUTHs and SELECTs; throws Error.
  /// `description` (no secrets) prefixes messages.
  Connection(const ClientOptions& options, const std::string& description);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Throws Error and marks the connection broken on I/O failure.
  Reply command(std::span<const std::string> args);
  std::vector<Reply> pipeline(std::span<const std::vector<std::string>> commands);

  /// After an I/O error or timeout the context cannot be used again.
  [[nodiscard]] bool broken() const noexcept { return broken_; }

 private:
  void append(std::span<const std::string> args);
  Reply read();
  [[noreturn]] void fail(const std::string& what);

  struct Free {
    void operator()(redisContext* context) const noexcept;
  };
  std::unique_ptr<redisContext, Free> context_;
  const std::string& description_;
  bool broken_ = false;
};

}  // namespace fleetcron::redis::detail
