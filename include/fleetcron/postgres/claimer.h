// fleetcron::postgres::Claimer — libtnb/cron's postgrescoord Claimer in
// C++: one cron_claims row per fire, inserted or taken over once expired,
// expiry from the server's now(); plus fences, batches, a clock-skew guard
// against the server's clock and store-reset detection (docs/postgres.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fleetcron/api.h"
#include "fleetcron/clock.h"
#include "fleetcron/coordination.h"
#include "fleetcron/postgres/connection.h"
#include "fleetcron/postgres/schema.h"

namespace fleetcron::postgres {

/// The reference's default: it must cover the largest expected jitter,
/// clock skew and delayed catch-up window.
inline constexpr std::chrono::nanoseconds default_claim_ttl = std::chrono::minutes{10};

struct FLEETCRON_API ClaimerOptions {
  /// Only `claims` (and its fence table and function) are used.
  TableNames tables;
  /// At least 1 ms; sent as float seconds, as the reference does.
  std::chrono::nanoseconds claim_ttl = default_claim_ttl;
  /// `g`: claims are refused (ClaimResult::Status::clock_skew) while the
  /// local clock differs from the server's now() by more than this (the
  /// server compares them, in the claim's statement), and fires scheduled
  /// before the store's reset epoch + g are refused (store_reset).
  /// nullopt: claim_ttl / 4. Positive, below claim_ttl / 2.
  std::optional<std::chrono::nanoseconds> max_clock_skew;
  /// The holder written into each row. Empty: "<hostname>-<16 hex digits>",
  /// the reference's form.
  std::string holder;
  /// How often claims expired for a minute are deleted (the reference's
  /// Cleanup statement, run after a claim). 0: never.
  std::chrono::nanoseconds cleanup_interval = std::chrono::minutes{1};
  /// The local clock: pass the scheduler's. Default: the system clock.
  std::shared_ptr<Clock> clock;
};

/// Thread-safe. claim() and claim_batch() are one statement (one round
/// trip) for any number of fires. A Go replica's claim and a fleetcron
/// replica's on the same table never both succeed for one fire.
class FLEETCRON_API Claimer final : public fleetcron::Claimer {
 public:
  /// Throws std::invalid_argument for a null connection or a rejected option.
  explicit Claimer(std::shared_ptr<Connection> connection, ClaimerOptions options = {});
  ~Claimer() override;
  Claimer(const Claimer&) = delete;
  Claimer& operator=(const Claimer&) = delete;

  /// Any failure is an error result (fail closed), never an exception.
  [[nodiscard]] ClaimResult claim(std::string_view fire_key) override;
  [[nodiscard]] std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys) override;
  /// One SELECT of the claims' rows (a row past its expiry is free); a
  /// failure, or a key no claim could store, tells nothing (empty).
  [[nodiscard]] std::vector<bool> already_claimed(std::span<const std::string> fire_keys) override;
  [[nodiscard]] bool tells_already_claimed() const override { return true; }
  /// claim_ttl - 2 * max_clock_skew: two replicas inside the guard differ
  /// by at most twice it, as on Redis.
  [[nodiscard]] std::chrono::nanoseconds dedup_window() const override;
  /// Refuses keys PostgreSQL text cannot hold (invalid UTF-8, a NUL byte).
  void check_entry_key(std::string_view key) const override;
  /// The reference's Cleanup: deletes claims expired for over a minute;
  /// returns how many. Throws BackendError.
  std::size_t cleanup();
  /// The offset to the server's clock measured by the last claim (nullopt before one).
  [[nodiscard]] std::optional<ClockOffset> clock_offset() const;
  [[nodiscard]] const ClaimerOptions& options() const noexcept;
  /// How many of this claimer's calls found a store reset (and wrote a new epoch).
  [[nodiscard]] std::uint64_t resets_found() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// "<hostname>-<16 hex digits>": the reference's holder identity.
[[nodiscard]] FLEETCRON_API std::string make_holder();

}  // namespace fleetcron::postgres
