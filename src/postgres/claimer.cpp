#include "fleetcron/postgres/claimer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>

#include "fleetcron/backend/clock_skew_guard.h"
#include "fleetcron/duration.h"
#include "fleetcron/backend/lease_elector.h"
#include "postgres/pool.h"

namespace fleetcron::postgres {

namespace {

// Fires per statement: one statement holds its rows' locks until it ends.
constexpr std::size_t keys_per_statement = 1000;

std::int64_t micros(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// Whether PostgreSQL text (UTF-8) can hold it: valid UTF-8, no NUL. One
// key that cannot would fail the whole batch's statement.
bool storable(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
    if (lead == 0 || length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    if (length == 2 && lead < 0xc2) return false;  // overlong
    i += length;
  }
  return true;
}

Instant from_micros(std::int64_t us) {
  return Instant{std::chrono::duration_cast<Instant::duration>(std::chrono::microseconds{us})};
}

// The claim of a batch, in one statement: the skew guard (the caller's
// clock against the server's now()), the epoch row and the fence counter
// decide which fires may be claimed at all (docs/postgres.md); those are
// then inserted, or take over an expired row, exactly as the reference's
// INSERT … ON CONFLICT … WHERE expires_at < now() does, with the fence of
// each row granted. Parameters: $1 fire keys, $2 their instants in µs
// (NULL: none), $3 holder, $4 TTL in float seconds, $5 max_clock_skew µs,
// $6 the largest fence this claimer saw, $7 the caller's clock in µs.
std::string claim_statement(const TableNames& t) {
  return fmt::format(
      "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS t_us, "
      "(SELECT value FROM {fence} WHERE id = 1) AS counter, "
      "(SELECT (extract(epoch FROM claimed_at) * 1000000)::bigint FROM {claims} WHERE fire_key = '{epoch}') AS "
      "epoch_us), "
      "store AS (SELECT t_us, epoch_us IS NULL OR coalesce(counter, 0) < $6::bigint AS reset, epoch_us FROM clock), "
      "rule AS (SELECT t_us, reset, CASE WHEN reset THEN t_us ELSE epoch_us END AS e_us FROM store), "
      "new_epoch AS (INSERT INTO {claims} AS e (fire_key, holder, claimed_at, expires_at) "
      "SELECT '{epoch}', 'fleetcron store-reset epoch', now(), 'infinity' FROM rule WHERE reset "
      "ON CONFLICT (fire_key) DO UPDATE SET claimed_at = greatest(e.claimed_at, now()) RETURNING 1), "
      "requests AS (SELECT u.k, u.i, CASE WHEN abs(r.t_us - $7::bigint) > $5::bigint THEN 'skew' "
      "WHEN u.s IS NULL THEN 'try' WHEN u.s < r.e_us + $5::bigint THEN 'reset' ELSE 'try' END AS verdict "
      "FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(k, s, i) CROSS JOIN rule r), "
      "claimed AS (INSERT INTO {claims} AS c (fire_key, holder, expires_at) "
      "SELECT k, $3, now() + ($4::float8 * interval '1 second') FROM requests WHERE verdict = 'try' "
      "ON CONFLICT (fire_key) DO UPDATE SET holder = EXCLUDED.holder, claimed_at = now(), "
      "expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence WHERE c.expires_at < now() "
      "RETURNING c.fire_key, c.fence) "
      "SELECT q.i, q.verdict, c.fence, r.t_us, r.e_us, r.reset FROM requests q CROSS JOIN rule r "
      "LEFT JOIN claimed c ON c.fire_key = q.k ORDER BY q.i",
      fmt::arg("fence", t.fence_table()), fmt::arg("claims", t.claims), fmt::arg("epoch", epoch_row));
}

// Which of the fires $1 hold a live claim: a row past its expiry is free
// (the claim takes it over). One row per fire, in order: (index, claimed).
std::string look_statement(const TableNames& t) {
  return fmt::format(
      "SELECT u.i, c.fire_key IS NOT NULL FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) "
      "LEFT JOIN {} c ON c.fire_key = u.k AND c.expires_at >= now() ORDER BY u.i",
      t.claims);
}

}  // namespace

std::string make_holder() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "unknown");
  return fmt::format("{}-{}", host, random_hex(8));
}

class FLEETCRON_LOCAL Claimer::Impl {
 public:
  Impl(std::shared_ptr<Connection> connection, ClaimerOptions options);
  std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys);
  void claim_chunk(std::span<const std::string> keys, std::span<ClaimResult> results);
  void maybe_clean_up();
  std::size_t cleanup();

  ClaimerOptions options_;
  std::shared_ptr<Connection> connection_;
  std::string statement_;
  std::string look_statement_;
  std::string ttl_seconds_;
  std::string skew_us_;
  std::atomic<std::uint64_t> fence_seen_{0};
  std::atomic<std::uint64_t> resets_found_{0};
  std::unique_ptr<backend::ClockSkewGuard> guard_;
  mutable std::mutex mutex_;  // guards the member below
  std::optional<Clock::SteadyTime> last_cleanup_;
};

Claimer::Impl::Impl(std::shared_ptr<Connection> connection, ClaimerOptions options)
    : options_(std::move(options)), connection_(std::move(connection)) {
  if (!connection_) throw std::invalid_argument("postgres::Claimer: connection is null");
  check_table_names(options_.tables);
  if (options_.claim_ttl < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(fmt::format("postgres::ClaimerOptions.claim_ttl: {} is below the minimum of 1ms",
                                            format_duration(options_.claim_ttl)));
  }
  if (!options_.clock) options_.clock = system_clock();
  // Every claim measures the offset (the statement returns the server's
  // time): the refresh interval is never consulted here.
  guard_ = std::make_unique<backend::ClockSkewGuard>("postgres::ClaimerOptions", "claim_ttl", "PostgreSQL server",
                                                     options_.claim_ttl, options_.max_clock_skew, std::chrono::hours{1},
                                                     options_.clock);
  options_.max_clock_skew = guard_->max_clock_skew();
  const auto skew = *options_.max_clock_skew;
  if (options_.cleanup_interval < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("postgres::ClaimerOptions.cleanup_interval: negative");
  }
  if (options_.holder.empty()) options_.holder = make_holder();
  statement_ = claim_statement(options_.tables);
  look_statement_ = look_statement(options_.tables);
  ttl_seconds_ = fmt::format("{:.6f}", std::chrono::duration<double>(options_.claim_ttl).count());
  skew_us_ = std::to_string(micros(skew));
}

std::vector<ClaimResult> Claimer::Impl::claim_batch(std::span<const std::string> fire_keys) {
  std::vector<ClaimResult> results(fire_keys.size());
  // Each key once per statement (ON CONFLICT cannot touch a row twice); a
  // repeat in the batch finds its first occurrence's claim.
  std::vector<std::string> keys;
  std::vector<std::size_t> where;
  std::map<std::string_view, std::size_t> first_of;  // key -> its first index
  std::vector<std::size_t> repeats;
  for (std::size_t i = 0; i < fire_keys.size(); ++i) {
    if (blank(fire_keys[i])) {
      results[i] = ClaimResult::failed("blank fire key");
    } else if (fire_keys[i] == epoch_row || !storable(fire_keys[i])) {
      results[i] = ClaimResult::failed(
          "fire key cannot be claimed on PostgreSQL: the epoch row's name, or not valid UTF-8 (or a NUL byte)");
    } else if (!first_of.emplace(fire_keys[i], i).second) {
      repeats.push_back(i);
    } else {
      keys.push_back(fire_keys[i]);
      where.push_back(i);
    }
  }
  std::vector<ClaimResult> answers(keys.size());
  for (std::size_t first = 0; first < keys.size(); first += keys_per_statement) {
    const std::size_t count = std::min(keys_per_statement, keys.size() - first);
    claim_chunk(std::span<const std::string>(keys).subspan(first, count),
                std::span<ClaimResult>(answers).subspan(first, count));
  }
  for (std::size_t k = 0; k < keys.size(); ++k) results[where[k]] = std::move(answers[k]);
  for (const std::size_t i : repeats) {
    const ClaimResult& first = results[first_of.at(fire_keys[i])];
    results[i] = first.status == ClaimResult::Status::claimed ? ClaimResult::taken() : first;
  }
  // Not after a failure: against a server that is down it would only double the wait.
  const bool answered = std::none_of(results.begin(), results.end(),
                                     [](const ClaimResult& r) { return r.status == ClaimResult::Status::error; });
  if (answered) maybe_clean_up();
  return results;
}

void Claimer::Impl::claim_chunk(std::span<const std::string> keys, std::span<ClaimResult> results) {
  std::string instants = "{";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto at = fire_key_instant(keys[i]);
    instants += (i ? "," : "") + (at ? std::to_string(micros(at->time_since_epoch())) : std::string("NULL"));
  }
  instants += '}';
  const auto steady = options_.clock->steady_now();
  const auto before = options_.clock->now();
  detail::Rows rows;
  try {
    rows =
        connection_->pool().exec(statement_, {detail::text_array({keys.begin(), keys.end()}), instants, options_.holder,
                                              ttl_seconds_, skew_us_, std::to_string(fence_seen_.load()),
                                              std::to_string(micros(before.time_since_epoch()))});
  } catch (const std::exception& e) {
    for (auto& result : results) result = ClaimResult::failed(e.what());  // fail closed
    return;
  }
  const auto after = options_.clock->now();
  if (rows.rows.size() != keys.size()) {
    for (auto& result : results) {
      result = ClaimResult::failed(fmt::format("{}: the claim answered {} rows for {} fires", connection_->describe(),
                                               rows.rows.size(), keys.size()));
    }
    return;
  }
  const std::int64_t server_us = std::stoll(rows.text(0, 3));
  const std::int64_t local_us = (micros(before.time_since_epoch()) + micros(after.time_since_epoch())) / 2;
  guard_->remember(std::chrono::microseconds{server_us - local_us}, steady);
  if (rows.text(0, 5) == "t") resets_found_.fetch_add(1);
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    const std::size_t k = std::stoul(rows.text(r, 0)) - 1;
    const std::string& verdict = rows.text(r, 1);
    if (verdict == "reset") {
      results[k] = ClaimResult::reset(guard_->epoch_refusal(from_micros(std::stoll(rows.text(r, 4)))));
    } else if (verdict != "try") {
      results[k] = ClaimResult::skewed(
          guard_->skew_refusal(std::chrono::microseconds{server_us - micros(before.time_since_epoch())}));
    } else if (rows.null(r, 2)) {
      results[k] = ClaimResult::taken();
    } else {
      const std::uint64_t fence = std::stoull(rows.text(r, 2));
      std::uint64_t seen = fence_seen_.load();
      while (seen < fence && !fence_seen_.compare_exchange_weak(seen, fence)) {
      }
      results[k] = ClaimResult::claimed(fence);
    }
  }
}

void Claimer::Impl::maybe_clean_up() {
  if (options_.cleanup_interval == std::chrono::nanoseconds::zero()) return;
  const auto now = options_.clock->steady_now();
  {
    std::lock_guard guard(mutex_);
    if (last_cleanup_ && now - *last_cleanup_ < options_.cleanup_interval) return;
    last_cleanup_ = now;
  }
  try {
    (void)cleanup();
  } catch (...) {
    // the next interval tries again; claims are unaffected by leftovers
  }
}

std::size_t Claimer::Impl::cleanup() {
  return connection_->pool()
      .exec(fmt::format("DELETE FROM {} WHERE expires_at < now() - interval '1 minute'", options_.tables.claims))
      .affected;
}

Claimer::Claimer(std::shared_ptr<Connection> connection, ClaimerOptions options)
    : impl_(std::make_unique<Impl>(std::move(connection), std::move(options))) {}
Claimer::~Claimer() = default;

ClaimResult Claimer::claim(std::string_view fire_key) {
  const std::string key(fire_key);
  return std::move(impl_->claim_batch(std::span<const std::string>(&key, 1)).front());
}

std::vector<ClaimResult> Claimer::claim_batch(std::span<const std::string> fire_keys) {
  return impl_->claim_batch(fire_keys);
}

std::vector<bool> Claimer::already_claimed(std::span<const std::string> fire_keys) {
  // Keys it could not claim (blank, not storable) tell nothing: claimed as usual, and fail there.
  for (const auto& key : fire_keys) {
    if (blank(key) || key == epoch_row || !storable(key)) return {};
  }
  if (fire_keys.empty()) return {};
  detail::Rows rows;
  try {
    rows = impl_->connection_->pool().exec(impl_->look_statement_, {detail::text_array({fire_keys.begin(), fire_keys.end()})});
  } catch (const std::exception&) {
    return {};  // tells nothing: the fires are claimed as usual
  }
  if (rows.rows.size() != fire_keys.size()) return {};
  std::vector<bool> claimed(fire_keys.size(), false);
  for (std::size_t r = 0; r < rows.rows.size(); ++r) claimed[std::stoul(rows.text(r, 0)) - 1] = rows.text(r, 1) == "t";
  return claimed;
}

std::chrono::nanoseconds Claimer::dedup_window() const {
  return impl_->guard_->dedup_window();
}

void Claimer::check_entry_key(std::string_view key) const {
  if (!storable(key)) {
    throw std::invalid_argument("entry key: not valid UTF-8 or holds a NUL byte, which PostgreSQL text cannot hold");
  }
}

std::size_t Claimer::cleanup() { return impl_->cleanup(); }

std::optional<ClockOffset> Claimer::clock_offset() const {
  return impl_->guard_->last_offset();
}

const ClaimerOptions& Claimer::options() const noexcept { return impl_->options_; }
std::uint64_t Claimer::resets_found() const noexcept { return impl_->resets_found_.load(); }

}  // namespace fleetcron::postgres
