// fleetcron::nats::Elector and nats::Claimer: the scheduler's coordination
// contract on NATS JetStream KV.
#pragma once

#include <functional>
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

/// Claims on a bucket whose TTL is the claim TTL (claims expire with it):
/// claim() creates the key (first writer wins; one request); the new
/// revision is the fencing token. Revisions only grow while the bucket's
/// stream exists; deleting the bucket resets them.
class Claimer final : public fleetcron::Claimer {
 public:
  /// Reads the bucket's TTL: std::invalid_argument if it is 0 (claims
  /// would never expire); Error if the bucket cannot be read.
  explicit Claimer(std::shared_ptr<Bucket> bucket, std::string key_prefix = "");
  /// Longest encoded key (prefix included): the server drops connections
  /// whose protocol lines exceed 4 KB. A longer one is an error result.
  static constexpr std::size_t max_key_bytes = 2048;
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  [[nodiscard]] std::chrono::nanoseconds claim_ttl() const noexcept { return ttl_; }
  /// Half the bucket's TTL: NATS has no clock-skew guard, so replica clocks
  /// are assumed within TTL/4 of each other (docs/nats.md).
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override { return ttl_ / 2; }
  /// Refuses an entry key whose longest fire key (nanosecond instant)
  /// encodes, with the prefix, to more than max_key_bytes.
  void check_entry_key(std::string_view key) const override { check_entry_key(prefix_, key); }
  /// The same rule for a prefix, before any bucket exists.
  static void check_entry_key(std::string_view key_prefix, std::string_view key);

 private:
  std::shared_ptr<Bucket> bucket_;
  std::string prefix_;
  std::chrono::nanoseconds ttl_{0};
};

}  // namespace fleetcron::nats
