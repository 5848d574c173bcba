// fleetcron::nats::Claimer: the scheduler's Claimer on NATS JetStream KV.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/nats/connection.h"

namespace fleetcron::nats {

/// Maps a fire key to a valid NATS key, the same on every replica and
/// collision-free: letters, digits, '-', '_' and '/' stay; every other
/// byte (including '=', '.', '@', ':') becomes '=' and two uppercase hex
/// digits. "job@2026-01-02T15:04:05.5Z" -> "job=402026-01-02T15=3A04=3A05=2E5Z".
[[nodiscard]] FLEETCRON_API std::string encode_key(std::string_view fire_key);

struct FLEETCRON_API ClaimerOptions {
  /// Prepended to every encoded fire key; must be valid in a NATS key.
  std::string claim_prefix;
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

/// The dedup window of claims with this TTL and skew guard: claim_ttl - 2
/// * max_clock_skew (Redis's rule; 5 min for a 10 min TTL and its default
/// guard).
[[nodiscard]] FLEETCRON_API std::chrono::nanoseconds dedup_window_for(std::chrono::nanoseconds claim_ttl,
                                                        std::chrono::nanoseconds max_clock_skew);

/// Claims on a bucket whose TTL is the claim TTL (claims expire with it).
/// claim() creates the key (first writer wins), then reads the server's
/// timestamps of its write and of the bucket's stream (one more request):
///  - the fence is the write's server time in µs (docs/fencing.md), so it
///    grows across recreated buckets and matches Redis's rule — raised to
///    1 above this claimer's previous fence when the server stamped two of
///    its writes in one microsecond (a JetStream cluster's leader does);
///  - a write whose timestamp is further than max_clock_skew from the local
///    clock is refused as clock_skew (the key stays written: lost, not run);
///  - a fire scheduled before the stream's creation + max_clock_skew is
///    refused as store_reset: the bucket was created (or recreated, after a
///    lost volume or a deletion) after a claim on it could have been made.
/// A bucket found missing (no responders) is created again with the
/// configuration it was bound with, and the claim is tried once more.
///
/// claim_batch() pipelines the creates (Bucket::create_many, up to
/// max_batch per round trip), then reads the stream's creation time and
/// every granted write's timestamp (pipelined direct gets): each claim is
/// judged as claim() judges it, its fence its write's server time in µs;
/// the skew guard measures each write against the round trip's midpoint
/// (an error of at most half the round trip, under a millisecond for
/// 1,024 creates on loopback).
class FLEETCRON_API Claimer final : public fleetcron::Claimer {
 public:
  /// Takes the bucket's TTL (the configured one: no request for a bucket
  /// bound by configuration): std::invalid_argument if it is 0 (claims
  /// would never expire) or an option rejects its value.
  explicit Claimer(std::shared_ptr<Bucket> bucket, ClaimerOptions options = {});
  ~Claimer() override;
  Claimer(const Claimer&) = delete;
  Claimer& operator=(const Claimer&) = delete;
  /// Longest encoded key (prefix included): the server drops connections
  /// whose protocol lines exceed 4 KB. A longer one is an error result.
  static constexpr std::size_t max_key_bytes = 2048;
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  /// Creates per round trip at most.
  static constexpr std::size_t max_batch = 1024;
  [[nodiscard]] std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys) override;
  [[nodiscard]] std::chrono::nanoseconds claim_ttl() const noexcept;
  /// dedup_window_for(claim_ttl(), max_clock_skew()).
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override;
  [[nodiscard]] std::chrono::nanoseconds max_clock_skew() const noexcept;
  /// The last measured offset to the server's clock, measured again first
  /// (a probe write) if older than skew_refresh_interval; nullopt if the
  /// server cannot be reached and nothing was measured before.
  [[nodiscard]] std::optional<ClockOffset> clock_offset();
  /// How many times this claimer found its bucket missing and recreated it.
  [[nodiscard]] std::uint64_t buckets_recreated() const noexcept;
  /// Refuses an entry key whose longest fire key (nanosecond instant)
  /// encodes, with the prefix, to more than max_key_bytes.
  void check_entry_key(std::string_view key) const override;
  /// The same rule for a prefix, before any bucket exists.
  static void check_entry_key(std::string_view claim_prefix, std::string_view key);
  /// The key of the probe write that measures the clock offset (prefix +
  /// "_clock": never an encoded fire key, which always holds "=40").
  [[nodiscard]] std::string probe_key() const;
  [[nodiscard]] static std::string probe_key(std::string_view claim_prefix);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::nats
