// fleetcron::nats::Elector and nats::Claimer: the scheduler's coordination
// contract on NATS JetStream KV.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <stop_token>
#include <thread>

#include "fleetcron/coordination.h"
#include "fleetcron/nats/election.h"

namespace fleetcron::nats {

struct ElectorOptions {
  /// The key contended for in the bucket.
  std::string key = "cron_leader";
  /// This replica's identity; empty: "<hostname>-<pid>-<8 random hex>".
  /// Must be unique among the candidates: two with one name would each
  /// take the other's record as their own.
  std::string name;
  /// Passed to the Election (splay, TTL validation, margin, clock, debug).
  ElectionOptions election;
};

/// Leadership from an Election campaigning on its own thread from
/// construction until resign() or destruction. The term (fencing token) is
/// the revision at which the leadership was won.
class Elector final : public fleetcron::Elector {
 public:
  /// Throws what Election's constructor throws.
  Elector(std::shared_ptr<Bucket> bucket, ElectorOptions options = {});
  ~Elector() override;
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  /// Leader once announced; follower while a candidate; error while the
  /// last campaign failed (the store unreachable).
  [[nodiscard]] Leadership is_leader() override;
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost) override;
  /// Stops campaigning; a leader resigns, so a candidate takes over at once.
  void resign() override;
  /// Forwarded to the election (Election::set_healthy).
  void set_liveness(std::function<bool()> alive) override { election_->set_healthy(std::move(alive)); }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] Election& election() noexcept { return *election_; }

 private:
  std::string name_;
  std::unique_ptr<Election> election_;
  std::mutex mutex_;  // guards lost_
  std::function<void(std::uint64_t)> lost_;
  std::stop_source stop_;
  std::mutex join_mutex_;
  std::thread thread_;
};

/// Maps a fire key to a valid NATS key, the same on every replica and
/// collision-free: letters, digits, '-', '_' and '/' stay; every other
/// byte (including '=', '.', '@', ':') becomes '=' and two uppercase hex
/// digits. "job@2026-01-02T15:04:05.5Z" -> "job=402026-01-02T15=3A04=3A05=2E5Z".
[[nodiscard]] std::string encode_key(std::string_view fire_key);

struct ClaimerOptions {
  /// Prepended to every encoded fire key; must be valid in a NATS key.
  std::string key_prefix;
  /// Claims are refused (ClaimResult::Status::clock_skew) while the local
  /// wall clock differs from the server's by more than this, measured from
  /// the timestamps the server gives writes. nullopt: the bucket TTL / 4.
  /// Must be positive and below TTL / 2; fires up to TTL - 2 * this old are
  /// deduplicated (dedup_window()), as on Redis.
  std::optional<std::chrono::nanoseconds> max_clock_skew{};
  /// A claim measures again (a probe write) when the last measurement is
  /// older than this; every granted claim measures too. 1 ms .. 1 h.
  std::chrono::nanoseconds skew_refresh_interval = std::chrono::seconds{30};
  /// The local clock: pass the scheduler's. Default: the system clock.
  std::shared_ptr<Clock> clock{};
};

/// Claims on a bucket whose TTL is the claim TTL (claims expire with it).
/// claim() creates the key (first writer wins), then reads the server's
/// timestamps of its write and of the bucket's stream (one more request):
///  - the fence is the write's server time in µs (docs/fencing.md), so it
///    grows across recreated buckets and matches Redis's rule;
///  - a write whose timestamp is further than max_clock_skew from the local
///    clock is refused as clock_skew (the key stays written: lost, not run);
///  - a fire scheduled before the stream's creation + max_clock_skew is
///    refused as store_reset: the bucket was created (or recreated, after a
///    lost volume or a deletion) after a claim on it could have been made.
/// A bucket found missing (no responders) is created again with the
/// configuration it was bound with, and the claim is tried once more.
class Claimer final : public fleetcron::Claimer {
 public:
  /// Reads the bucket's TTL: std::invalid_argument if it is 0 (claims
  /// would never expire) or an option rejects its value; Error if the
  /// bucket cannot be read.
  explicit Claimer(std::shared_ptr<Bucket> bucket, ClaimerOptions options = {});
  Claimer(std::shared_ptr<Bucket> bucket, std::string key_prefix)
      : Claimer(std::move(bucket), ClaimerOptions{.key_prefix = std::move(key_prefix)}) {}
  /// Longest encoded key (prefix included): the server drops connections
  /// whose protocol lines exceed 4 KB. A longer one is an error result.
  static constexpr std::size_t max_key_bytes = 2048;
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  [[nodiscard]] std::chrono::nanoseconds claim_ttl() const noexcept { return ttl_; }
  /// claim_ttl - 2 * max_clock_skew, as Redis's (5 min for a 10 min TTL).
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override { return ttl_ - 2 * max_skew_; }
  [[nodiscard]] std::chrono::nanoseconds max_clock_skew() const noexcept { return max_skew_; }
  /// The last measured offset to the server's clock, measured again first
  /// (a probe write) if older than skew_refresh_interval; nullopt if the
  /// server cannot be reached and nothing was measured before.
  [[nodiscard]] std::optional<ClockOffset> clock_offset();
  /// How many times this claimer found its bucket missing and recreated it.
  [[nodiscard]] std::uint64_t buckets_recreated() const noexcept { return recreated_.load(); }
  /// Refuses an entry key whose longest fire key (nanosecond instant)
  /// encodes, with the prefix, to more than max_key_bytes.
  void check_entry_key(std::string_view key) const override { check_entry_key(options_.key_prefix, key); }
  /// The same rule for a prefix, before any bucket exists.
  static void check_entry_key(std::string_view key_prefix, std::string_view key);
  /// The key of the probe write that measures the clock offset (prefix +
  /// "_clock": never an encoded fire key, which always holds "=40").
  [[nodiscard]] std::string probe_key() const { return options_.key_prefix + "_clock"; }

 private:
  ClaimResult claim_once(std::string_view fire_key, const std::string& key, bool may_recreate);
  ClaimResult check_grant(std::string_view fire_key, std::uint64_t revision, Instant sent, Instant answered);
  void remember_offset(std::chrono::microseconds offset, Clock::SteadyTime at);
  std::string skew_message(std::chrono::microseconds offset) const;

  std::shared_ptr<Bucket> bucket_;
  ClaimerOptions options_;
  std::chrono::nanoseconds ttl_{0};
  std::chrono::nanoseconds max_skew_{0};
  std::mutex mutex_;  // guards offset_
  std::optional<ClockOffset> offset_;
  std::atomic<std::uint64_t> recreated_{0};
};

}  // namespace fleetcron::nats
