#include "fleetcron/fire_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include "core/fleet_state/record_text.h"
#include "fleetcron/duration.h"
#include "fleetcron/events.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron {

namespace {

using detail::decode_text;
using detail::encode_text;
using detail::micros_text;
using detail::parse_instant;
using detail::parse_number;
using detail::parse_optional;

constexpr std::array<std::string_view, 8> fate_names{"skipped", "missed",    "cancelled", "running",
                                                     "lost",    "succeeded", "failed",    "timed-out"};
constexpr std::string_view record_version = "1";
constexpr std::size_t record_fields = 20;

bool has_space(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

template <typename Number>
std::string number_text(const std::optional<Number>& value) {
  return value ? std::to_string(*value) : std::string("-");
}

/// Splits on single spaces into exactly `fields.size()` fields.
template <std::size_t N>
bool split(std::string_view text, std::array<std::string_view, N>& fields) {
  for (std::size_t i = 0; i < N; ++i) {
    const auto space = text.find(' ');
    if ((space == std::string_view::npos) != (i + 1 == N)) return false;
    fields[i] = text.substr(0, space);
    if (fields[i].empty()) return false;
    if (space != std::string_view::npos) text.remove_prefix(space + 1);
  }
  return true;
}

void check_text(std::string_view field, std::string_view text, std::size_t bound, const FireRecord& record) {
  if (text.size() > bound) {
    throw std::invalid_argument(fmt::format("fire record {}: {} is {} bytes, more than {}", record.fire_key, field,
                                            text.size(), bound));
  }
}

}  // namespace

std::string_view to_string(FireFate fate) noexcept { return fate_names[static_cast<std::size_t>(fate)]; }

std::optional<FireFate> fire_fate_from_string(std::string_view text) noexcept {
  for (std::size_t i = 0; i < fate_names.size(); ++i) {
    if (fate_names[i] == text) return static_cast<FireFate>(i);
  }
  return std::nullopt;
}

int ledger_rank(const FireRecord& record) noexcept {
  switch (record.fate) {
    case FireFate::skipped:
      return record.reason == to_string(SkipReason::not_leader) ? 0 : 1;
    case FireFate::missed:
      // A replica's own late loop records each instant (its fire key, no
      // "#missed"): what it saw, below what any other replica records.
      return record.fire_key.ends_with("#missed") ? 1 : 0;
    case FireFate::cancelled:
      return record.started_at ? 5 : 2;
    case FireFate::running:
      return 3;
    case FireFate::lost:
      return 4;
    case FireFate::succeeded:
    case FireFate::failed:
    case FireFate::timed_out:
      return 5;
  }
  return 1;
}

void check_ledger_retention(const LedgerRetention& retention) {
  if (retention.keep_count < 1 || retention.keep_count > LedgerRetention::max_keep_count) {
    throw std::invalid_argument(fmt::format("ledger retention: keep_count {} is outside 1..{}", retention.keep_count,
                                            LedgerRetention::max_keep_count));
  }
  if (retention.keep_for < std::chrono::milliseconds{1} || retention.keep_for > LedgerRetention::max_keep_for) {
    throw std::invalid_argument(fmt::format("ledger retention: keep_for {} is outside 1ms..{}",
                                            format_duration(retention.keep_for),
                                            format_duration(LedgerRetention::max_keep_for)));
  }
}

void check_fire_record(const FireRecord& record) {
  if (std::all_of(record.job_key.begin(), record.job_key.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    throw std::invalid_argument(fmt::format("fire record {}: the job key is blank", record.fire_key));
  }
  if (record.fire_key.size() <= record.job_key.size() || !record.fire_key.starts_with(record.job_key) ||
      record.fire_key[record.job_key.size()] != '@') {
    throw std::invalid_argument(
        fmt::format("fire record {}: the fire key does not start with \"{}@\"", record.fire_key, record.job_key));
  }
  if (record.replica_id.empty() || record.replica_id.size() > 64 || has_space(record.replica_id)) {
    throw std::invalid_argument(fmt::format(
        "fire record {}: replica id \"{}\" is not 1 to 64 characters without whitespace", record.fire_key,
        record.replica_id));
  }
  check_text("reason", record.reason, max_fire_reason_bytes, record);
  check_text("error", record.error, max_fire_error_bytes, record);
  check_text("output_tail", record.output_tail, max_output_tail_bytes, record);
}

FireRecord cut_fire_record(FireRecord record) {
  if (record.reason.size() > max_fire_reason_bytes) record.reason.resize(max_fire_reason_bytes);
  if (record.error.size() > max_fire_error_bytes) record.error.resize(max_fire_error_bytes);
  if (record.output_tail.size() > max_output_tail_bytes) {
    record.output_tail.erase(0, record.output_tail.size() - max_output_tail_bytes);
  }
  return record;
}

std::string format_fire_record(const FireRecord& r) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", ledger_rank(r), record_version,
                     to_string(r.fate), micros_text(r.scheduled_at), r.manual ? 1 : 0, r.fence, r.attempts,
                     micros_text(r.started_at), micros_text(r.finished_at), r.duration.count(),
                     number_text(r.exit_status), number_text(r.signal), r.missed_count, micros_text(r.last_missed),
                     encode_text(r.job_key), encode_text(r.fire_key), encode_text(r.replica_id),
                     encode_text(r.reason), encode_text(r.error), encode_text(r.output_tail));
}

std::optional<FireRecord> parse_fire_record(std::string_view text) {
  std::array<std::string_view, record_fields> f;
  if (text.size() > max_fire_record_bytes || !split(text, f) || f[1] != record_version) return std::nullopt;
  FireRecord r;
  const auto fate = fire_fate_from_string(f[2]);
  std::optional<Instant> scheduled;
  std::int64_t duration = 0;
  int manual = 0;
  if (!fate || !parse_instant(f[3], scheduled) || !scheduled || !parse_number(f[4], manual) || manual > 1 ||
      manual < 0 || !parse_number(f[5], r.fence) || !parse_number(f[6], r.attempts) ||
      !parse_instant(f[7], r.started_at) || !parse_instant(f[8], r.finished_at) || !parse_number(f[9], duration) ||
      !parse_optional(f[10], r.exit_status) || !parse_optional(f[11], r.signal) ||
      !parse_number(f[12], r.missed_count) || !parse_instant(f[13], r.last_missed)) {
    return std::nullopt;
  }
  r.fate = *fate;
  r.scheduled_at = *scheduled;
  r.manual = manual == 1;
  r.duration = std::chrono::nanoseconds{duration};
  std::array<std::string*, 6> texts{&r.job_key, &r.fire_key, &r.replica_id, &r.reason, &r.error, &r.output_tail};
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto decoded = decode_text(f[14 + i]);
    if (!decoded) return std::nullopt;
    *texts[i] = std::move(*decoded);
  }
  if (std::to_string(ledger_rank(r)) != f[0]) return std::nullopt;
  return r;
}

}  // namespace fleetcron
