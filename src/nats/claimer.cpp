// nats::Claimer: claims as key creations in a bucket whose TTL is the
// claim TTL, fenced and checked against the server's clock.
#include "fleetcron/nats/claimer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <variant>

#include "fleetcron/backend/clock_skew_guard.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "nats/keys.h"
#include "nats/status.h"

namespace fleetcron::nats {

namespace {

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

struct FLEETCRON_LOCAL Claimer::Impl {
  Impl(std::shared_ptr<Bucket> bucket, ClaimerOptions options);
  ClaimResult claim(std::string_view fire_key);
  /// The key's claim key, or the result that refuses it without a request.
  std::variant<std::string, ClaimResult> prepare(std::string_view fire_key, const std::optional<ClockOffset>& offset);
  std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys);
  /// One create_many round trip for fire_keys[indexes…], results into out.
  void claim_chunk(std::span<const std::string> fire_keys, std::span<const std::size_t> indexes,
                   std::span<const std::string> keys, std::vector<ClaimResult>& out);
  /// Grants (or refuses) the created claims of a chunk by one read of the stream's times.
  void grant_chunk(std::span<const std::string> fire_keys, std::span<const std::size_t> created,
                   std::span<const std::uint64_t> revisions, Instant sent, Instant answered, std::vector<ClaimResult>& out);
  ClaimResult claim_once(std::string_view fire_key, const std::string& key, bool may_recreate);
  ClaimResult check_grant(std::string_view fire_key, std::uint64_t revision, Instant sent, Instant answered);
  std::optional<ClockOffset> clock_offset();
  /// store_reset if the fire is scheduled before the stream's creation + max_clock_skew.
  std::optional<ClaimResult> reset_refusal(std::string_view fire_key,
                                           std::chrono::sys_time<std::chrono::nanoseconds> created) const;

  std::shared_ptr<Bucket> bucket;
  ClaimerOptions options;
  std::chrono::nanoseconds ttl{0};
  std::unique_ptr<backend::ClockSkewGuard> guard;
  std::atomic<std::uint64_t> recreated{0};
  std::atomic<std::uint64_t> last_fence{0};
  /// The fence of a grant whose write the server stamped `written_us`: at
  /// least that, and above every fence this claimer handed out before (a
  /// JetStream cluster's leader stamps several writes per microsecond).
  std::uint64_t next_fence(std::int64_t written_us);
};

std::string encode_key(std::string_view fire_key) {
  std::string out;
  out.reserve(fire_key.size() + 8);
  for (const char c : fire_key) {
    const auto byte = static_cast<unsigned char>(c);
    // ASCII only, whatever the locale: every replica must encode alike.
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '/';
    if (plain) {
      out.push_back(c);
    } else {
      out += fmt::format("={:02X}", byte);
    }
  }
  return out;
}

Claimer::Impl::Impl(std::shared_ptr<Bucket> bucket_in, ClaimerOptions options_in)
    : bucket(std::move(bucket_in)), options(std::move(options_in)) {
  if (!bucket) throw std::invalid_argument("nats::Claimer: bucket is null");
  const std::string& prefix = options.claim_prefix;
  if (!prefix.empty() && !detail::valid_key(prefix + "x")) {
    throw std::invalid_argument(fmt::format("nats::Claimer: key prefix \"{}\" is not valid in a NATS key", prefix));
  }
  ttl = bucket->ttl();
  if (ttl <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format("nats::Claimer: bucket {} has no TTL, so claims would never expire; "
                                            "create it with the claim TTL",
                                            bucket->name()));
  }
  if (!options.clock) options.clock = system_clock();
  guard = std::make_unique<backend::ClockSkewGuard>("nats::ClaimerOptions", "the bucket TTL", "NATS server", ttl,
                                                    options.max_clock_skew, options.skew_refresh_interval,
                                                    options.clock);
}

void Claimer::check_entry_key(std::string_view claim_prefix, std::string_view key) {
  // The longest fire key: the instant with nanoseconds (9 digits).
  const std::string longest = fmt::format("{}{}", claim_prefix, encode_key(std::string(key) + "@2026-01-02T15:04:05.123456789Z"));
  if (longest.size() > max_key_bytes) {
    throw std::invalid_argument(fmt::format("key \"{}\": its fire keys encode to up to {} bytes for NATS, above the "
                                            "{}-byte limit (each byte other than letters, digits, - _ / takes three)",
                                            key, longest.size(), max_key_bytes));
  }
}

ClaimResult Claimer::claim(std::string_view fire_key) { return impl_->claim(fire_key); }
std::vector<ClaimResult> Claimer::claim_batch(std::span<const std::string> fire_keys) {
  return impl_->claim_batch(fire_keys);
}

ClaimResult Claimer::Impl::claim(std::string_view fire_key) {
  auto prepared = prepare(fire_key, clock_offset());
  if (auto* refused = std::get_if<ClaimResult>(&prepared)) return std::move(*refused);
  return claim_once(fire_key, std::get<std::string>(prepared), true);
}

std::variant<std::string, ClaimResult> Claimer::Impl::prepare(std::string_view fire_key,
                                                              const std::optional<ClockOffset>& offset) {
  if (blank(fire_key)) return ClaimResult::failed("blank fire key");
  std::string key = options.claim_prefix + encode_key(fire_key);
  if (key.size() > max_key_bytes) {
    // The server drops a connection whose protocol line is too long (4 KB).
    return ClaimResult::failed(fmt::format("fire key encodes to {} bytes, above the {}-byte limit for NATS keys",
                                           key.size(), max_key_bytes));
  }
  if (offset && guard->beyond(offset->offset)) return ClaimResult::skewed(guard->skew_refusal(offset->offset));  // nothing written
  return key;
}

std::vector<ClaimResult> Claimer::Impl::claim_batch(std::span<const std::string> fire_keys) {
  std::vector<ClaimResult> out(fire_keys.size());
  std::vector<std::size_t> indexes;
  std::vector<std::string> keys;
  const auto offset = clock_offset();  // once: a stale measurement costs one probe, not one per key
  for (std::size_t i = 0; i < fire_keys.size(); ++i) {
    auto prepared = prepare(fire_keys[i], offset);
    if (auto* refused = std::get_if<ClaimResult>(&prepared)) {
      out[i] = std::move(*refused);
      continue;
    }
    indexes.push_back(i);
    keys.push_back(std::move(std::get<std::string>(prepared)));
    if (keys.size() == max_batch) {
      claim_chunk(fire_keys, indexes, keys, out);
      indexes.clear();
      keys.clear();
    }
  }
  if (!keys.empty()) claim_chunk(fire_keys, indexes, keys, out);
  return out;
}

void Claimer::Impl::claim_chunk(std::span<const std::string> fire_keys, std::span<const std::size_t> indexes,
                                std::span<const std::string> keys, std::vector<ClaimResult>& out) {
  const Instant sent = options.clock->now();
  std::vector<CreateResult> created;
  try {
    created = bucket->create_many(keys, "1");
  } catch (const std::exception& e) {
    for (const std::size_t i : indexes) out[i] = ClaimResult::failed(e.what());
    return;
  }
  const Instant answered = options.clock->now();  // every write of the chunk lies within [sent, answered]
  std::vector<std::size_t> granted, missing;
  std::vector<std::uint64_t> revisions;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::size_t i = indexes[k];
    switch (created[k].status) {
      case CreateResult::Status::created:
        granted.push_back(i);
        revisions.push_back(created[k].revision);
        break;
      case CreateResult::Status::taken: out[i] = ClaimResult::taken(); break;
      case CreateResult::Status::missing: missing.push_back(k); break;
      case CreateResult::Status::failed: out[i] = ClaimResult::failed(created[k].error); break;
    }
  }
  if (!granted.empty()) grant_chunk(fire_keys, granted, revisions, sent, answered, out);
  // No stream answered (the bucket is gone): the first such key recreates
  // it, once per chunk; the others are claimed one by one after it.
  for (std::size_t m = 0; m < missing.size(); ++m) {
    const std::size_t k = missing[m];
    out[indexes[k]] = claim_once(fire_keys[indexes[k]], keys[k], m == 0);
  }
}

void Claimer::Impl::grant_chunk(std::span<const std::string> fire_keys, std::span<const std::size_t> created,
                                std::span<const std::uint64_t> revisions, Instant sent, Instant answered,
                                std::vector<ClaimResult>& out) {
  const auto steady = options.clock->steady_now();
  WriteTimes stream;
  std::vector<std::optional<std::chrono::sys_time<std::chrono::nanoseconds>>> written;
  std::string why;
  try {
    stream = bucket->stream_times();
    written = bucket->written_times(revisions);
  } catch (const std::exception& e) {
    why = e.what();
    written.assign(revisions.size(), std::nullopt);
  }
  const Instant local_mid = sent + (answered - sent) / 2;
  // created[] is in publish order: one connection's publishes get
  // increasing revisions, so fences follow the writes' order.
  for (std::size_t k = 0; k < created.size(); ++k) {
    const std::size_t i = created[k];
    if (!written[k]) {
      out[i] = ClaimResult::failed(fmt::format(
          "claimed at revision {}, but the write's server time could not be read, so it is not run{}{}", revisions[k],
          why.empty() ? "" : ": ", why));
      continue;
    }
    const auto offset = std::chrono::duration_cast<std::chrono::microseconds>(*written[k] - local_mid);
    if (k + 1 == created.size()) guard->remember(offset, steady);
    if (guard->beyond(offset)) {
      out[i] = ClaimResult::skewed(guard->skew_refusal(offset) +
                                   fmt::format(" (claimed at revision {}; not run)", revisions[k]));
    } else if (auto reset = reset_refusal(fire_keys[i], stream.stream_created)) {
      out[i] = std::move(*reset);
    } else {
      out[i] = ClaimResult::claimed(
          next_fence(std::chrono::duration_cast<std::chrono::microseconds>(written[k]->time_since_epoch()).count()));
    }
  }
}

ClaimResult Claimer::Impl::claim_once(std::string_view fire_key, const std::string& key, bool may_recreate) {
  const Instant sent = options.clock->now();
  std::optional<std::uint64_t> revision;
  try {
    revision = bucket->create(key, "1");
  } catch (const BackendError& e) {
    if (!detail::missing(e) || !may_recreate) return ClaimResult::failed(e.what());
    // The bucket's stream is gone (deleted, or lost with the server's
    // store): create it again, then claim under the reset rule.
    try {
      bucket->recreate();
    } catch (const std::exception& again) {
      return ClaimResult::failed(fmt::format("{}; recreating the bucket failed: {}", e.what(), again.what()));
    }
    recreated.fetch_add(1);
    return claim_once(fire_key, key, false);
  } catch (const std::exception& e) {
    return ClaimResult::failed(e.what());
  }
  if (!revision) return ClaimResult::taken();
  return check_grant(fire_key, *revision, sent, options.clock->now());
}

ClaimResult Claimer::Impl::check_grant(std::string_view fire_key, std::uint64_t revision, Instant sent, Instant answered) {
  const auto steady = options.clock->steady_now();
  WriteTimes times;
  try {
    times = bucket->write_times(revision);
  } catch (const std::exception& e) {
    // Claimed, but it cannot be placed in the server's time: not run.
    return ClaimResult::failed(fmt::format("claimed at revision {}, but the write's server time could not be read, so "
                                           "it is not run: {}",
                                           revision, e.what()));
  }
  const Instant local_mid = sent + (answered - sent) / 2;
  const auto offset = std::chrono::duration_cast<std::chrono::microseconds>(times.written - local_mid);
  guard->remember(offset, steady);
  if (guard->beyond(offset)) {
    return ClaimResult::skewed(guard->skew_refusal(offset) + fmt::format(" (claimed at revision {}; not run)", revision));
  }
  if (auto reset = reset_refusal(fire_key, times.stream_created)) return std::move(*reset);
  return ClaimResult::claimed(
      next_fence(std::chrono::duration_cast<std::chrono::microseconds>(times.written.time_since_epoch()).count()));
}

std::uint64_t Claimer::Impl::next_fence(std::int64_t written_us) {
  const auto floor = static_cast<std::uint64_t>(std::max<std::int64_t>(written_us, 1));
  std::uint64_t last = last_fence.load();
  std::uint64_t fence = 0;
  do {
    fence = std::max(floor, last + 1);
  } while (!last_fence.compare_exchange_weak(last, fence));
  return fence;
}

std::optional<ClaimResult> Claimer::Impl::reset_refusal(std::string_view fire_key,
                                                        std::chrono::sys_time<std::chrono::nanoseconds> created) const {
  const auto at = fire_key_instant(fire_key);
  const Instant creation{std::chrono::duration_cast<Instant::duration>(created.time_since_epoch())};
  if (!at || !guard->before_reset(*at, creation)) return std::nullopt;
  return ClaimResult::reset(guard->reset_refusal(
      fmt::format("bucket {}'s creation", bucket->name()), creation,
      "the bucket was created after a claim on this fire could have been made (a lost volume or a deleted bucket?)"));
}

std::optional<ClockOffset> Claimer::Impl::clock_offset() {
  if (auto fresh = guard->fresh_offset()) return fresh;
  try {
    const Instant sent = options.clock->now();
    const auto steady = options.clock->steady_now();
    const std::uint64_t revision = bucket->put(Claimer::probe_key(options.claim_prefix), "clock");
    const Instant answered = options.clock->now();
    const WriteTimes times = bucket->write_times(revision);
    guard->remember(std::chrono::duration_cast<std::chrono::microseconds>(times.written - (sent + (answered - sent) / 2)),
                    steady);
  } catch (...) {
    // unreachable or missing: answer with the last measurement, if any
  }
  return guard->last_offset();
}

Claimer::Claimer(std::shared_ptr<Bucket> bucket, ClaimerOptions options)
    : impl_(std::make_unique<Impl>(std::move(bucket), std::move(options))) {}
Claimer::~Claimer() = default;
std::chrono::nanoseconds Claimer::claim_ttl() const noexcept { return impl_->ttl; }
std::chrono::nanoseconds Claimer::dedup_window() const { return impl_->guard->dedup_window(); }
std::chrono::nanoseconds Claimer::max_clock_skew() const noexcept { return impl_->guard->max_clock_skew(); }
std::optional<ClockOffset> Claimer::clock_offset() { return impl_->clock_offset(); }
std::uint64_t Claimer::buckets_recreated() const noexcept { return impl_->recreated.load(); }
void Claimer::check_entry_key(std::string_view key) const { check_entry_key(impl_->options.claim_prefix, key); }
std::string Claimer::probe_key() const { return probe_key(impl_->options.claim_prefix); }
std::string Claimer::probe_key(std::string_view claim_prefix) { return std::string(claim_prefix) + "_clock"; }

std::chrono::nanoseconds dedup_window_for(std::chrono::nanoseconds claim_ttl, std::chrono::nanoseconds max_clock_skew) {
  return claim_ttl - 2 * max_clock_skew;
}

}  // namespace fleetcron::nats
