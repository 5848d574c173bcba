// fleetcron::nats::Elector: the scheduler's Elector on NATS JetStream KV
// (the reference design is choria's KV leader election).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fleetcron/api.h"
#include "fleetcron/coordination.h"
#include "fleetcron/nats/election.h"

namespace fleetcron::nats {

/// The key contended for, libtnb/cron's and choria's default.
inline constexpr std::string_view default_leader_key = "cron_leader";
/// The leader bucket's TTL fleetcron's daemon uses (the election's lease).
inline constexpr std::chrono::nanoseconds default_leader_ttl = std::chrono::seconds{10};

struct FLEETCRON_API ElectorOptions {
  /// The key contended for in the bucket; a valid NATS key (check_key()).
  std::string leader_key{default_leader_key};
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
class FLEETCRON_API Elector final : public fleetcron::Elector {
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
  void set_liveness(std::function<bool()> alive) override;

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] Election& election() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Throws std::invalid_argument naming `key` unless it is a valid NATS key
/// (non-empty; letters, digits, _ - / = . and \; no leading, trailing or
/// doubled '.').
FLEETCRON_API void check_key(std::string_view key);

}  // namespace fleetcron::nats
