#include "fleetcron/nats/coordination.h"

#include <fmt/format.h>
#include <nats/nats.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "fleetcron/duration.h"
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

Claimer::Claimer(std::shared_ptr<Bucket> bucket, std::string key_prefix)
    : bucket_(std::move(bucket)), prefix_(std::move(key_prefix)) {
  if (!bucket_) throw std::invalid_argument("nats::Claimer: bucket is null");
  if (!prefix_.empty() && !detail::valid_key(prefix_ + "x")) {
    throw std::invalid_argument(fmt::format("nats::Claimer: key prefix \"{}\" is not valid in a NATS key", prefix_));
  }
  ttl_ = bucket_->ttl();
  if (ttl_ <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format("nats::Claimer: bucket {} has no TTL, so claims would never expire; "
                                            "create it with the claim TTL",
                                            bucket_->name()));
  }
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
  const std::string key = prefix_ + encode_key(fire_key);
  if (key.size() > max_key_bytes) {
    // The server drops a connection whose protocol line is too long (4 KB).
    return ClaimResult::failed(fmt::format("fire key encodes to {} bytes, above the {}-byte limit for NATS keys",
                                           key.size(), max_key_bytes));
  }
  try {
    if (const auto revision = bucket_->create(key, "1")) {
      return ClaimResult::claimed(*revision);
    }
    return ClaimResult::taken();
  } catch (const std::exception& e) {
    return ClaimResult::failed(e.what());
  }
}

}  // namespace fleetcron::nats
