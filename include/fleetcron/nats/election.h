// fleetcron::nats::Election — choria's NATS KV leader election
// (asyncjobs/election) in C++, with its reference behaviour and these
// additions: stop() resigns, candidates watch the key so a graceful
// handover takes milliseconds, a leader's backoff never outlasts its lease,
// a local renew deadline, and a fencing token.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::nats {

enum class State { unknown, candidate, leader };
/// "unknown", "candidate", "leader".
[[nodiscard]] FLEETCRON_API std::string_view to_string(State state) noexcept;

/// The wait before the n-th campaign (n = consecutive failed campaigns;
/// 0 for a leader). Replaces the default interval (75% of the bucket TTL).
class FLEETCRON_API Backoff {
 public:
  virtual ~Backoff() = default;
  [[nodiscard]] virtual std::chrono::nanoseconds duration(int n) const = 0;
};

struct FLEETCRON_API ElectionOptions {
  /// Before each campaign, with the state it campaigns in.
  std::function<void(State)> on_campaign;
  /// Leadership announced: after the first renewal that follows the win
  /// (one campaign interval), or at once when the previous leader resigned.
  std::function<void()> on_won;
  /// Announced leadership ended (lost, demoted, or stopped).
  std::function<void()> on_lost;
  std::shared_ptr<const Backoff> backoff;
  std::function<void(std::string_view message)> debug;
  /// A random wait, uniform in [0, startup_splay), before the first
  /// campaign, so a fleet started together does not stampede. The
  /// reference waits up to 5 s; tests set 0.
  std::chrono::nanoseconds startup_splay = std::chrono::seconds{5};
  /// The reference accepts a bucket TTL from 10 s to 1 h only. Tests with
  /// short TTLs turn this off (the TTL must still be at least 10 ms).
  bool validate_ttl = true;
  /// A leader that has not renewed for TTL - renew_margin on its steady
  /// clock demotes itself, even while a KV call is stuck. nullopt: TTL / 5.
  std::optional<std::chrono::nanoseconds> renew_margin;
  /// Steady time for waits and the deadline. Default: the system clock.
  std::shared_ptr<Clock> clock;
};

/// One candidate for leadership of `key` in `bucket`, under `name` (its
/// identity: unique among the candidates). Thread-safe. Callbacks run on
/// the election's threads, one at a time, never under its lock: they may
/// call is_leader(), state() or stop().
class FLEETCRON_API Election {
 public:
  /// Reads the bucket's TTL (one request). Throws std::invalid_argument
  /// ("bucket TTL should be 10 seconds or more", "bucket TTL should be less
  /// than or equal to 1 hour", a blank name or key, a key NATS refuses) or
  /// BackendError if the bucket cannot be read.
  Election(std::string name, std::string key, std::shared_ptr<Bucket> bucket, ElectionOptions options = {});
  /// Stops; must not run while start() is still running on another thread.
  ~Election();
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  /// Campaigns until stop() or `stop_token` asks it to end, then resigns
  /// and returns (after at most one in-flight KV request). Throws
  /// std::logic_error("election already running") if already started; a
  /// stopped election can be started again.
  void start(std::stop_token stop_token = {});
  /// Ends start() from any thread, callbacks included; does not block.
  void stop();
  /// Before each campaign: while `healthy()` is false the campaign is
  /// skipped (a leader does not renew, so its local deadline demotes it; a
  /// candidate does not campaign). Any thread.
  void set_healthy(std::function<bool()> healthy);

  /// True once leadership is announced (on_won) and while it holds.
  [[nodiscard]] bool is_leader() const;
  [[nodiscard]] State state() const;
  /// The term: the server's timestamp, in µs, of the write that won the
  /// leadership. Server time only grows, across a recreated bucket too, so
  /// it is a fencing token on the same scale as every backend's fences
  /// (docs/fencing.md). 0 unless leader.
  [[nodiscard]] std::uint64_t fencing_token() const;
  /// 75% of the bucket TTL.
  [[nodiscard]] std::chrono::nanoseconds campaign_interval() const noexcept;
  [[nodiscard]] std::chrono::nanoseconds bucket_ttl() const noexcept;
  /// The last campaign's error ("" after a clean campaign).
  [[nodiscard]] std::string last_error() const;
  /// is_leader() and fencing_token() read together (one lock).
  [[nodiscard]] std::pair<bool, std::uint64_t> leadership() const;
  /// The fencing token of the leadership most recently lost (for on_lost).
  [[nodiscard]] std::uint64_t last_lost_term() const;

  /// The value earlier fleetcron versions resigned with (today a resign is
  /// a revision-guarded delete); still taken over at once. No candidate
  /// name can equal it.
  static constexpr std::string_view resigned_marker = std::string_view("\0fleetcron-resigned\0", 20);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// The reference's range of election bucket TTLs (ElectionOptions::validate_ttl).
inline constexpr std::chrono::nanoseconds min_election_ttl = std::chrono::seconds{10};
inline constexpr std::chrono::nanoseconds max_election_ttl = std::chrono::hours{1};
/// Throws std::invalid_argument unless min_election_ttl <= ttl <= max_election_ttl.
FLEETCRON_API void check_election_ttl(std::chrono::nanoseconds ttl);

}  // namespace fleetcron::nats
