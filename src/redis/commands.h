// Internal: the command API behind redis::Client — the pool, commands,
// pipelines and scripts by SHA with a fallback on NOSCRIPT. The claimer,
// the elector, the daemon's status command and the tests use it; cron
// users do not, so it is not installed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fleetcron/redis/client.h"
#include "redis/reply.h"

namespace fleetcron::redis {

namespace detail {
class Connection;
class TlsContext;
}  // namespace detail

/// A Lua script, called by SHA1 (EVALSHA) once the server has it. The SHA
/// is learnt from SCRIPT LOAD on first use; a NOSCRIPT answer (script
/// cache flushed, server restarted) falls back to EVAL, which loads it again.
class Script {
 public:
  explicit Script(std::string source) : source_(std::move(source)) {}
  [[nodiscard]] const std::string& source() const noexcept { return source_; }

 private:
  friend class Client::Impl;
  std::string source_;
  mutable std::mutex mutex_;  // guards sha_
  mutable std::string sha_;
};

class FLEETCRON_LOCAL Client::Impl {
 public:
  explicit Impl(ClientOptions options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// Sends one command, arguments binary-safe. Throws BackendError.
  Reply command(std::span<const std::string> args);
  Reply command(std::initializer_list<std::string_view> args);

  /// Sends all commands, then reads all replies: one round trip. Throws
  /// BackendError if the connection fails (then some commands may have run).
  std::vector<Reply> pipeline(std::span<const std::vector<std::string>> commands);

  /// EVALSHA with a fallback to EVAL on NOSCRIPT. Throws BackendError.
  Reply eval(const Script& script, std::span<const std::string> keys, std::span<const std::string> args);

  /// One script call per element of `calls` (its KEYS then its ARGV; the
  /// first key_counts[i] are keys), pipelined; calls answered NOSCRIPT are
  /// sent again with EVAL, so the result is as if the script was always there.
  std::vector<Reply> eval_pipeline(const Script& script, std::span<const std::size_t> key_counts,
                                   std::span<const std::vector<std::string>> calls);

  void ping();
  [[nodiscard]] const ClientOptions& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& description() const noexcept { return description_; }
  [[nodiscard]] ClientStats stats() const noexcept;

 private:
  class Lease;
  std::unique_ptr<detail::Connection> checkout();
  void checkin(std::unique_ptr<detail::Connection> connection);
  /// A new connection: to options_' server, or to the primary the
  /// sentinels name (asking them if it is not known), checked with ROLE.
  std::unique_ptr<detail::Connection> connect();
  using Address = std::pair<std::string, std::uint16_t>;
  /// A connection to `primary`, kept only if ROLE says master.
  std::unique_ptr<detail::Connection> connect_primary(const Address& primary, std::uint64_t generation);
  /// What sentinel `index` names as the primary (nullopt: it does not know
  /// the master); throws BackendError if it cannot be asked.
  std::optional<Address> ask_sentinel(std::size_t index);
  /// Sentinel: the primary of `generation` is no more (its connection
  /// broke, its connect failed, it answered READONLY): the next connect
  /// asks the sentinels, and pooled connections to it are dropped.
  void forget_primary(std::uint64_t generation);
  std::string script_sha(const Script& script);

  ClientOptions options_;
  std::string description_;
  std::unique_ptr<detail::TlsContext> tls_;  // with options_.tls
  std::mutex mutex_;  // guards the members below
  std::condition_variable returned_;
  std::vector<std::unique_ptr<detail::Connection>> idle_;
  std::size_t open_ = 0;  // idle plus lent out plus connecting
  std::chrono::steady_clock::time_point next_connect_at_{};
  std::chrono::milliseconds backoff_{0};
  std::string last_connect_error_;
  // Sentinel: the primary last named, and the generation of the pool's
  // connections to it (bumped when it is forgotten).
  std::optional<Address> primary_;
  std::uint64_t generation_ = 0;  // stays 0 without Sentinel
  std::size_t next_sentinel_ = 0;  // the one to ask first: the last that answered

  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> connect_failures_{0};
};

}  // namespace fleetcron::redis
