#include "fleetcron/fleet_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include "core/fleet_state/record_text.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron {

using detail::parse_number;

std::string format_cursor_record(const JobCursor& cursor) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(cursor.instant).time_since_epoch().count();
  return fmt::format("{} {} {} {}{}{}", micros, cursor.schedule_digest, cursor.version,
                     cursor.claimant.empty() ? std::string("-") : cursor.claimant, cursor.epoch.empty() ? "" : " ",
                     cursor.epoch);
}

std::optional<JobCursor> parse_cursor_record(std::string_view text) {
  std::array<std::string_view, 5> fields;  // the epoch is optional
  std::size_t count = 0;
  while (count < fields.size()) {
    const auto space = text.find(' ');
    fields[count++] = text.substr(0, space);
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
    if (count == fields.size()) return std::nullopt;  // a sixth field
  }
  std::int64_t micros = 0;
  JobCursor cursor;
  if (count < 4 || !parse_number(fields[0], micros) || !parse_number(fields[1], cursor.schedule_digest) ||
      !parse_number(fields[2], cursor.version) || fields[3].empty() || (count == 5 && fields[4].empty())) {
    return std::nullopt;
  }
  cursor.instant = Instant{std::chrono::microseconds{micros}};
  if (fields[3] != "-") cursor.claimant = fields[3];
  if (count == 5) cursor.epoch = fields[4];
  return cursor;
}

std::vector<CursorRead> FleetState::read_cursors(std::span<const std::string> job_keys) {
  std::vector<CursorRead> answers;
  answers.reserve(job_keys.size());
  for (const auto& key : job_keys) answers.push_back(read_cursor(key));
  return answers;
}

std::vector<CursorAdvance> FleetState::advance_cursors(std::span<const CursorAdvanceRequest> requests) {
  std::vector<CursorAdvance> answers;
  answers.reserve(requests.size());
  for (const auto& request : requests) {
    answers.push_back(advance_cursor(request.job_key, request.instant, request.schedule_digest, request.keep_for));
  }
  return answers;
}

Instant cursor_instant(Instant at) noexcept { return std::chrono::floor<std::chrono::microseconds>(at); }

void check_job_key(std::string_view job_key) {
  const bool blank = std::all_of(job_key.begin(), job_key.end(),
                                 [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (blank) throw std::invalid_argument("fleet state: the job key is blank");
}

void check_cursor_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for) {
  check_job_key(job_key);
  if (keep_for < std::chrono::milliseconds{1} || keep_for > max_cursor_keep_for) {
    throw std::invalid_argument(fmt::format("fleet state: keep_for {} for job \"{}\" is outside 1ms..{}",
                                            format_duration(keep_for), job_key,
                                            format_duration(max_cursor_keep_for)));
  }
}

void check_ledger_writes(std::span<const LedgerWrite> writes) {
  for (const auto& write : writes) {
    check_fire_record(write.record);
    check_ledger_retention(write.retention);
  }
}

void check_ledger_read(std::string_view job_key, std::size_t limit) {
  check_job_key(job_key);
  if (limit < 1 || limit > LedgerRetention::max_keep_count) {
    throw std::invalid_argument(fmt::format("fleet state: ledger read of job \"{}\": limit {} is outside 1..{}",
                                            job_key, limit, LedgerRetention::max_keep_count));
  }
}

namespace {

FireRecord to_the_microsecond(FireRecord record) {
  const auto floor = [](Instant at) { return std::chrono::floor<std::chrono::microseconds>(at); };
  record.scheduled_at = floor(record.scheduled_at);
  for (auto* at : {&record.started_at, &record.finished_at, &record.last_missed}) {
    if (*at) **at = floor(**at);
  }
  return record;
}

bool newer(const FireRecord& a, const FireRecord& b) {
  return a.scheduled_at != b.scheduled_at ? a.scheduled_at > b.scheduled_at : a.fire_key > b.fire_key;
}

void apply_retention(std::vector<FireRecord>& ledger, const LedgerRetention& retention,
                     std::optional<Instant> store_now) {
  if (ledger.empty()) return;
  // Relative to the newest record, or the store's clock if that is
  // earlier: a record dated ahead by a replica's clock deletes nothing.
  const Instant newest = store_now ? std::min(ledger.front().scheduled_at, *store_now) : ledger.front().scheduled_at;
  const Instant oldest = newest - std::chrono::duration_cast<Instant::duration>(retention.keep_for);
  const auto past = std::find_if(ledger.begin(), ledger.end(), [&](const FireRecord& r) { return r.scheduled_at < oldest; });
  ledger.erase(past, ledger.end());
  if (ledger.size() > retention.keep_count) ledger.resize(retention.keep_count);
}

}  // namespace

std::optional<Instant> FleetState::store_now() { return std::nullopt; }

std::vector<LedgerWriteResult> apply_ledger_writes(std::vector<FireRecord>& ledger,
                                                   std::span<const LedgerWrite> writes,
                                                   std::optional<Instant> store_now) {
  std::vector<LedgerWriteResult> results;
  results.reserve(writes.size());
  for (const auto& write : writes) {
    FireRecord record = to_the_microsecond(write.record);
    const auto same = std::find_if(ledger.begin(), ledger.end(),
                                   [&](const FireRecord& kept) { return kept.fire_key == record.fire_key; });
    if (same != ledger.end()) {
      if (ledger_rank(*same) >= ledger_rank(record)) {
        results.push_back({LedgerWriteResult::Status::outranked, {}});
        continue;
      }
      ledger.erase(same);
    }
    const auto at = std::find_if(ledger.begin(), ledger.end(), [&](const FireRecord& kept) { return newer(record, kept); });
    const std::string fire_key = record.fire_key;
    ledger.insert(at, std::move(record));
    apply_retention(ledger, write.retention, store_now);
    const bool kept = std::any_of(ledger.begin(), ledger.end(), [&](const FireRecord& r) { return r.fire_key == fire_key; });
    results.push_back({kept ? LedgerWriteResult::Status::written : LedgerWriteResult::Status::let_go, {}});
  }
  return results;
}

void check_catch_up_arguments(std::string_view job_key, std::chrono::nanoseconds keep_for,
                              const std::optional<JobCursor>& seen, Instant instant, std::string_view claimant) {
  check_cursor_arguments(job_key, keep_for);
  if (seen && cursor_instant(instant) <= seen->instant) {
    throw std::invalid_argument(fmt::format("fleet state: catch-up of job \"{}\" to {} is not after the cursor {}",
                                            job_key, format_rfc3339(instant), format_rfc3339(seen->instant)));
  }
  const bool spaced = std::any_of(claimant.begin(), claimant.end(),
                                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (claimant.empty() || claimant.size() > 64 || spaced) {
    throw std::invalid_argument(fmt::format(
        "fleet state: claimant \"{}\" of job \"{}\" is not 1 to 64 characters without whitespace", claimant, job_key));
  }
}

}  // namespace fleetcron
