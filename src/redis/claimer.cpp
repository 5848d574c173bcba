#include "fleetcron/redis/claimer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>

#include "fleetcron/backend/clock_skew_guard.h"
#include "fleetcron/backend_error.h"
#include "fleetcron/duration.h"
#include "redis/commands.h"
#include "redis/replies.h"
#include "redis/scripts.h"

namespace fleetcron::redis {

namespace {

const Script& claim_script() {
  static const Script script(detail::claim_script);
  return script;
}

// Claim keys per script call: large enough to amortise the call, small
// enough that one call holds the server for at most about a millisecond.
constexpr std::size_t keys_per_call = 500;

std::string whole_milliseconds(std::chrono::nanoseconds ttl) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(ttl).count());
}

std::int64_t micros_since_epoch(Instant t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// The scheduled instant in µs as the script compares it, '' if the key has none.
std::string scheduled_us(std::string_view fire_key) {
  const auto at = fleetcron::fire_key_instant(fire_key);
  return at ? std::to_string(micros_since_epoch(*at)) : std::string();
}

}  // namespace

class FLEETCRON_LOCAL Claimer::Impl {
 public:
  Impl(std::shared_ptr<Client> client, ClaimerOptions options);
  std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys);
  std::optional<ClockOffset> clock_offset();
  Client& client() { return *client_; }

  ClaimerOptions options_;
  std::unique_ptr<backend::ClockSkewGuard> guard_;
  std::atomic<std::uint64_t> resets_found_{0};

 private:
  std::string reset_refusal(std::int64_t epoch_us) const;
  void remember_fence(std::uint64_t fence);

  std::shared_ptr<Client> client_;
  std::string ttl_ms_;
  std::string max_skew_us_;
  std::atomic<std::uint64_t> fence_seen_{0};
};

Claimer::Claimer(std::shared_ptr<Client> client, ClaimerOptions options)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(options))) {}
Claimer::~Claimer() = default;

ClaimResult Claimer::claim(std::string_view fire_key) {
  const std::string key(fire_key);
  return std::move(claim_batch(std::span<const std::string>(&key, 1)).front());
}

std::vector<ClaimResult> Claimer::claim_batch(std::span<const std::string> fire_keys) {
  return impl_->claim_batch(fire_keys);
}

std::vector<bool> Claimer::already_claimed(std::span<const std::string> fire_keys) {
  if (fire_keys.empty()) return {};
  std::vector<std::string> command{"MGET"};
  command.reserve(fire_keys.size() + 1);
  for (const auto& key : fire_keys) command.push_back(impl_->options_.claim_prefix + key);
  Reply reply;
  try {
    reply = impl_->client().impl().command(command);
  } catch (const std::exception&) {
    return {};  // tells nothing: the fires are claimed as usual
  }
  if (reply.type != Reply::Type::array || reply.elements.size() != fire_keys.size()) return {};
  std::vector<bool> claimed;
  claimed.reserve(fire_keys.size());
  // Any value is a claim: a fence, libtnb/cron's "1", or "0" for a fire refused before a reset.
  for (const Reply& value : reply.elements) claimed.push_back(!value.is_nil());
  return claimed;
}

std::chrono::nanoseconds Claimer::dedup_window() const { return impl_->guard_->dedup_window(); }

std::optional<ClockOffset> Claimer::clock_offset() { return impl_->clock_offset(); }

NewStoreDeclaration Claimer::declare_new_store() {
  static const Script script(detail::declare_new_store_script);
  const std::array<std::string, 2> keys{impl_->options_.fence_key, impl_->options_.epoch_key};
  const Reply reply = impl_->client().impl().eval(script, keys, std::span<const std::string>{});
  if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::integer || reply.elements[1].type != Reply::Type::string) {
    throw ProtocolError(fmt::format("{}: the new-store script answered {}", impl_->client().describe(),
                                    reply.is_error() ? reply.text : std::string(to_string(reply.type))));
  }
  using Status = NewStoreDeclaration::Status;
  const std::int64_t code = reply.elements[0].integer;
  return {code == 1 ? Status::declared : code == 0 ? Status::has_epoch : Status::holds_claims, reply.elements[1].text};
}
const ClaimerOptions& Claimer::options() const noexcept { return impl_->options_; }
std::uint64_t Claimer::resets_found() const noexcept { return impl_->resets_found_.load(); }

Claimer::Impl::Impl(std::shared_ptr<Client> client, ClaimerOptions options)
    : options_(std::move(options)), client_(std::move(client)) {
  if (!client_) throw std::invalid_argument("redis::Claimer: client is null");
  if (options_.claim_ttl < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(fmt::format("redis::ClaimerOptions.claim_ttl: {} is below the minimum of 1ms",
                                            format_duration(options_.claim_ttl)));
  }
  if (!options_.clock) options_.clock = system_clock();
  guard_ = std::make_unique<backend::ClockSkewGuard>("redis::ClaimerOptions", "claim_ttl", "Redis server",
                                                     options_.claim_ttl, options_.max_clock_skew,
                                                     options_.skew_refresh_interval, options_.clock);
  options_.max_clock_skew = guard_->max_clock_skew();
  if (options_.fence_key.empty()) options_.fence_key = options_.claim_prefix + "fence";
  if (options_.epoch_key.empty()) options_.epoch_key = options_.claim_prefix + "epoch";
  ttl_ms_ = whole_milliseconds(options_.claim_ttl);
  max_skew_us_ = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(*options_.max_clock_skew).count());
}

namespace {

// One script call per chunk of keys, all chunks in one pipeline: a chunk
// bounds how long one call holds the server.
struct ClaimCalls {
  std::vector<std::vector<std::string>> args;    // per call: KEYS then ARGV
  std::vector<std::vector<std::size_t>> chunks;  // per call: indexes into the fire keys
  std::vector<std::size_t> key_counts;           // per call: how many of args are KEYS
};

// The calls for `fire_keys`; a blank key is answered in `results` and
// left out. `shared_args`: ttl, local µs, skew µs, fence seen.
ClaimCalls plan_calls(std::span<const std::string> fire_keys, const ClaimerOptions& options,
                      const std::vector<std::string>& shared_args, std::vector<ClaimResult>& results) {
  ClaimCalls calls;
  std::vector<std::vector<std::string>> instants;  // per call: the keys' scheduled µs
  for (std::size_t i = 0; i < fire_keys.size(); ++i) {
    if (blank(fire_keys[i])) {
      results[i] = ClaimResult::failed("blank fire key");
      continue;
    }
    if (calls.args.empty() || calls.chunks.back().size() == keys_per_call) {
      calls.args.emplace_back();
      calls.args.back().reserve(2 * std::min(keys_per_call, fire_keys.size() - i) + 6);
      calls.args.back().push_back(options.fence_key);
      calls.args.back().push_back(options.epoch_key);
      calls.chunks.emplace_back();
      instants.emplace_back();
    }
    calls.args.back().push_back(options.claim_prefix + fire_keys[i]);
    calls.chunks.back().push_back(i);
    instants.back().push_back(scheduled_us(fire_keys[i]));
  }
  for (std::size_t c = 0; c < calls.args.size(); ++c) {
    calls.key_counts.push_back(calls.chunks[c].size() + 2);
    calls.args[c].insert(calls.args[c].end(), shared_args.begin(), shared_args.end());
    for (auto& at : instants[c]) calls.args[c].push_back(std::move(at));
  }
  return calls;
}

void fail_chunk(const std::vector<std::size_t>& chunk, const std::string& error, std::vector<ClaimResult>& results) {
  for (const std::size_t i : chunk) results[i] = ClaimResult::failed(error);
}

}  // namespace

std::vector<ClaimResult> Claimer::Impl::claim_batch(std::span<const std::string> fire_keys) {
  std::vector<ClaimResult> results(fire_keys.size());
  const auto steady = options_.clock->steady_now();
  const std::vector<std::string> shared_args{ttl_ms_, std::to_string(micros_since_epoch(options_.clock->now())),
                                             max_skew_us_, std::to_string(fence_seen_.load())};
  const ClaimCalls calls = plan_calls(fire_keys, options_, shared_args, results);
  if (calls.args.empty()) return results;
  std::vector<Reply> replies;
  try {
    replies = client_->impl().eval_pipeline(claim_script(), calls.key_counts, calls.args);
  } catch (...) {
    // Fail closed, never throw: whatever went wrong skips these fires.
    std::string error = client_->describe() + ": claim failed";
    try {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
    }
    for (const auto& chunk : calls.chunks) fail_chunk(chunk, error, results);
    return results;
  }
  for (std::size_t c = 0; c < calls.chunks.size(); ++c) {
    const auto& chunk = calls.chunks[c];
    detail::ClaimReply reply;
    if (replies[c].is_error()) {
      reply.error = replies[c].text;
    } else {
      reply = detail::parse_claim_reply(replies[c], chunk.size());
    }
    if (!reply.error.empty()) {
      fail_chunk(chunk, fmt::format("{}: {}", client_->describe(), reply.error), results);
      continue;
    }
    guard_->remember(reply.offset, steady);
    remember_fence(reply.fence_counter);
    if (reply.reset_found) resets_found_.fetch_add(1);
    for (std::size_t k = 0; k < chunk.size(); ++k) {
      const std::int64_t outcome = reply.outcomes[k];
      if (outcome > 0) {
        remember_fence(static_cast<std::uint64_t>(outcome));
        results[chunk[k]] = ClaimResult::claimed(static_cast<std::uint64_t>(outcome));
      } else if (outcome == 0) {
        results[chunk[k]] = ClaimResult::taken();
      } else if (outcome == -1) {
        results[chunk[k]] = ClaimResult::skewed(guard_->skew_refusal(reply.offset));
      } else {
        results[chunk[k]] = ClaimResult::reset(reset_refusal(reply.epoch_us));
      }
    }
  }
  return results;
}

void Claimer::Impl::remember_fence(std::uint64_t fence) {
  std::uint64_t seen = fence_seen_.load();
  while (seen < fence && !fence_seen_.compare_exchange_weak(seen, fence)) {
  }
}

std::string Claimer::Impl::reset_refusal(std::int64_t epoch_us) const {
  return guard_->epoch_refusal(Instant{std::chrono::duration_cast<Instant::duration>(std::chrono::microseconds{epoch_us})});
}

std::optional<ClockOffset> Claimer::Impl::clock_offset() {
  if (auto fresh = guard_->fresh_offset()) return fresh;
  try {
    const auto before = options_.clock->now();
    const auto steady = options_.clock->steady_now();
    const Reply reply = client_->impl().command({"TIME"});
    const auto after = options_.clock->now();
    if (reply.type == Reply::Type::array && reply.elements.size() == 2) {
      const std::int64_t server_us = std::stoll(reply.elements[0].text) * 1'000'000 + std::stoll(reply.elements[1].text);
      const std::int64_t local_us = (micros_since_epoch(before) + micros_since_epoch(after)) / 2;
      guard_->remember(std::chrono::microseconds{server_us - local_us}, steady);
    }
  } catch (...) {
    // unreachable, or a TIME reply that is not two numbers: answer with
    // the last measurement, if any
  }
  return guard_->last_offset();
}

}  // namespace fleetcron::redis
