#include "fleetcron/nats/coordination.h"

#include <fmt/format.h>
#include <nats/nats.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "nats/keys.h"

namespace fleetcron::nats {

namespace {

std::string default_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
  std::random_device random;
  return fmt::format("{}-{}-{:08x}", host, getpid(), random());
}

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

// ---- Elector

Elector::Elector(std::shared_ptr<Bucket> bucket, ElectorOptions options)
    : name_(options.name.empty() ? default_name() : options.name) {
  auto election_options = std::move(options.election);
  auto user_lost = std::move(election_options.on_lost);
  election_options.on_lost = [this, user_lost] {
    std::function<void(std::uint64_t)> lost;
    {
      std::lock_guard guard(mutex_);
      lost = lost_;
    }
    const std::uint64_t term = election_->last_lost_term();
    if (lost && term != 0) lost(term);
    if (user_lost) user_lost();
  };
  election_ = std::make_unique<Election>(name_, options.key, std::move(bucket), std::move(election_options));
  // The stop token, not stop(): a resign() that comes before start() has
  // begun must still end it.
  thread_ = std::thread([this, token = stop_.get_token()] {
    try {
      election_->start(token);
    } catch (...) {
      // start() throws only for a second start or a failure to create its
      // threads; is_leader() then answers follower.
    }
    nats_ReleaseThreadMemory();
  });
}

Elector::~Elector() { resign(); }

Leadership Elector::is_leader() {
  const auto [leader, term] = election_->leadership();
  if (leader) return Leadership::leader(term);
  std::string error = election_->last_error();
  if (!error.empty()) return Leadership::failed(std::move(error));
  return Leadership::follower();
}

void Elector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  std::lock_guard guard(mutex_);
  lost_ = std::move(lost);
}

void Elector::resign() {
  stop_.request_stop();
  election_->stop();
  std::lock_guard guard(join_mutex_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

// ---- Claimer

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

Claimer::Claimer(std::shared_ptr<Bucket> bucket, ClaimerOptions options)
    : bucket_(std::move(bucket)), options_(std::move(options)) {
  if (!bucket_) throw std::invalid_argument("nats::Claimer: bucket is null");
  const std::string& prefix = options_.key_prefix;
  if (!prefix.empty() && !detail::valid_key(prefix + "x")) {
    throw std::invalid_argument(fmt::format("nats::Claimer: key prefix \"{}\" is not valid in a NATS key", prefix));
  }
  ttl_ = bucket_->ttl();
  if (ttl_ <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format("nats::Claimer: bucket {} has no TTL, so claims would never expire; "
                                            "create it with the claim TTL",
                                            bucket_->name()));
  }
  max_skew_ = options_.max_clock_skew.value_or(ttl_ / 4);
  if (max_skew_ <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(
        fmt::format("nats::ClaimerOptions.max_clock_skew: {} is not positive", format_duration(max_skew_)));
  }
  if (max_skew_ >= ttl_ - max_skew_) {  // 2·skew ≥ TTL, without overflow
    throw std::invalid_argument(fmt::format(
        "nats::ClaimerOptions.max_clock_skew: {} is not below the bucket TTL / 2 ({}): two replicas at opposite ends "
        "of the guard could both claim a fire",
        format_duration(max_skew_), format_duration(ttl_ / 2)));
  }
  if (options_.skew_refresh_interval < std::chrono::milliseconds{1} ||
      options_.skew_refresh_interval > std::chrono::hours{1}) {
    throw std::invalid_argument(fmt::format("nats::ClaimerOptions.skew_refresh_interval: {} is out of range 1ms..1h",
                                            format_duration(options_.skew_refresh_interval)));
  }
  if (!options_.clock) options_.clock = system_clock();
}

void Claimer::check_entry_key(std::string_view key_prefix, std::string_view key) {
  // The longest fire key: the instant with nanoseconds (9 digits).
  const std::string longest = fmt::format("{}{}", key_prefix, encode_key(std::string(key) + "@2026-01-02T15:04:05.123456789Z"));
  if (longest.size() > max_key_bytes) {
    throw std::invalid_argument(fmt::format("key \"{}\": its fire keys encode to up to {} bytes for NATS, above the "
                                            "{}-byte limit (each byte other than letters, digits, - _ / takes three)",
                                            key, longest.size(), max_key_bytes));
  }
}

ClaimResult Claimer::claim(std::string_view fire_key) {
  if (blank(fire_key)) return ClaimResult::failed("blank fire key");
  const std::string key = options_.key_prefix + encode_key(fire_key);
  if (key.size() > max_key_bytes) {
    // The server drops a connection whose protocol line is too long (4 KB).
    return ClaimResult::failed(fmt::format("fire key encodes to {} bytes, above the {}-byte limit for NATS keys",
                                           key.size(), max_key_bytes));
  }
  if (const auto offset = clock_offset(); offset && std::chrono::abs(offset->offset) > max_skew_) {
    return ClaimResult::skewed(skew_message(offset->offset));  // nothing written
  }
  return claim_once(fire_key, key, true);
}

ClaimResult Claimer::claim_once(std::string_view fire_key, const std::string& key, bool may_recreate) {
  const Instant sent = options_.clock->now();
  std::optional<std::uint64_t> revision;
  try {
    revision = bucket_->create(key, "1");
  } catch (const Error& e) {
    if (!e.missing() || !may_recreate) return ClaimResult::failed(e.what());
    // The bucket's stream is gone (deleted, or lost with the server's
    // store): create it again, then claim under the reset rule.
    try {
      bucket_->recreate();
    } catch (const std::exception& again) {
      return ClaimResult::failed(fmt::format("{}; recreating the bucket failed: {}", e.what(), again.what()));
    }
    recreated_.fetch_add(1);
    return claim_once(fire_key, key, false);
  } catch (const std::exception& e) {
    return ClaimResult::failed(e.what());
  }
  if (!revision) return ClaimResult::taken();
  return check_grant(fire_key, *revision, sent, options_.clock->now());
}

ClaimResult Claimer::check_grant(std::string_view fire_key, std::uint64_t revision, Instant sent, Instant answered) {
  const auto steady = options_.clock->steady_now();
  WriteTimes times;
  try {
    times = bucket_->write_times(revision);
  } catch (const std::exception& e) {
    // Claimed, but it cannot be placed in the server's time: not run.
    return ClaimResult::failed(fmt::format("claimed at revision {}, but the write's server time could not be read, so "
                                           "it is not run: {}",
                                           revision, e.what()));
  }
  const Instant local_mid = sent + (answered - sent) / 2;
  const auto offset = std::chrono::duration_cast<std::chrono::microseconds>(times.written - local_mid);
  remember_offset(offset, steady);
  if (std::chrono::abs(offset) > max_skew_) {
    return ClaimResult::skewed(skew_message(offset) + fmt::format(" (claimed at revision {}; not run)", revision));
  }
  const auto at = fire_key_instant(fire_key);
  if (at && *at < times.stream_created + max_skew_) {
    return ClaimResult::reset(fmt::format(
        "scheduled before bucket {}'s creation {} + max_clock_skew {}: the bucket was created after a claim on this "
        "fire could have been made (a lost volume or a deleted bucket?); not claimed again",
        bucket_->name(), format_rfc3339(Instant{std::chrono::duration_cast<Instant::duration>(times.stream_created.time_since_epoch())}),
        format_duration(max_skew_)));
  }
  const auto fence = std::chrono::duration_cast<std::chrono::microseconds>(times.written.time_since_epoch()).count();
  return ClaimResult::claimed(static_cast<std::uint64_t>(std::max<std::int64_t>(fence, 1)));
}

std::optional<ClockOffset> Claimer::clock_offset() {
  {
    std::lock_guard guard(mutex_);
    if (offset_ && options_.clock->steady_now() - offset_->measured_at < options_.skew_refresh_interval) return offset_;
  }
  try {
    const Instant sent = options_.clock->now();
    const auto steady = options_.clock->steady_now();
    const std::uint64_t revision = bucket_->put(probe_key(), "clock");
    const Instant answered = options_.clock->now();
    const WriteTimes times = bucket_->write_times(revision);
    remember_offset(std::chrono::duration_cast<std::chrono::microseconds>(times.written - (sent + (answered - sent) / 2)),
                    steady);
  } catch (...) {
    // unreachable or missing: answer with the last measurement, if any
  }
  std::lock_guard guard(mutex_);
  return offset_;
}

void Claimer::remember_offset(std::chrono::microseconds offset, Clock::SteadyTime at) {
  std::lock_guard guard(mutex_);
  if (!offset_ || offset_->measured_at <= at) offset_ = ClockOffset{offset, at};
}

std::string Claimer::skew_message(std::chrono::microseconds offset) const {
  return fmt::format("local clock is {} {} the NATS server's, beyond max_clock_skew {}",
                     format_duration(offset < offset.zero() ? -offset : offset),
                     offset > offset.zero() ? "behind" : "ahead of", format_duration(max_skew_));
}

}  // namespace fleetcron::nats
