#include "fleetcron/postgres/fleet_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

#include "core/support/fnv1a.h"
#include "postgres/pool.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron::postgres {

namespace {

std::string micros_text(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::floor<std::chrono::microseconds>(d).count());
}

std::string micros_text(Instant at) { return micros_text(at.time_since_epoch()); }

// The server's clock in µs: the store's time (docs/fleet-state.md, "One clock").
constexpr std::string_view server_now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

constexpr std::string_view cursor_columns = "instant_us, schedule_digest, version, claimant";

// A cursor from the row's first four columns (cursor_columns).
JobCursor cursor_of(const detail::Rows& rows, std::size_t r) {
  JobCursor cursor;
  cursor.instant =
      Instant{std::chrono::duration_cast<Instant::duration>(std::chrono::microseconds{std::stoll(rows.text(r, 0))})};
  cursor.schedule_digest = std::stoull(rows.text(r, 1));
  cursor.version = std::stoull(rows.text(r, 2));
  cursor.claimant = rows.text(r, 3);
  return cursor;
}

std::string expiry(std::string_view micros_param) {
  return fmt::format("now() + {}::bigint * interval '1 microsecond'", micros_param);
}

}  // namespace

class FLEETCRON_LOCAL FleetState::Impl {
 public:
  Impl(std::shared_ptr<Connection> pooled, FleetStateOptions chosen)
      : connection(std::move(pooled)), options(std::move(chosen)) {
    const TableNames& t = options.tables;
    read_cursor =
        fmt::format("SELECT {} FROM {} WHERE job_key = $1::bytea AND expires_at > now()", cursor_columns, t.cursors());
    // Several at once: the keys as an array of bytea hex inputs.
    read_cursors = fmt::format("SELECT {}, job_key FROM {} WHERE job_key = ANY ($1::bytea[]) AND expires_at > now()",
                               cursor_columns, t.cursors());
    // A maximum in one upsert; an expired row counts as absent.
    const std::string moved = "(c.expires_at <= now() OR c.instant_us < EXCLUDED.instant_us)";
    advance = fmt::format(
        "INSERT INTO {0} AS c (job_key, instant_us, schedule_digest, version, claimant, moved, expires_at) "
        "VALUES ($1::bytea, $2::bigint, $3::numeric, 1, '', true, {1}) ON CONFLICT (job_key) DO UPDATE SET "
        "instant_us = CASE WHEN {2} THEN EXCLUDED.instant_us ELSE c.instant_us END, "
        "schedule_digest = CASE WHEN {2} THEN EXCLUDED.schedule_digest ELSE c.schedule_digest END, "
        "version = CASE WHEN c.expires_at <= now() THEN 1 WHEN {2} THEN c.version + 1 ELSE c.version END, "
        "claimant = CASE WHEN {2} THEN '' ELSE c.claimant END, moved = {2}, "
        "expires_at = greatest(c.expires_at, EXCLUDED.expires_at) RETURNING {3}, moved",
        t.cursors(), expiry("$4"), moved, cursor_columns);
    catch_up_new = fmt::format(
        "INSERT INTO {0} AS c (job_key, instant_us, schedule_digest, version, claimant, moved, expires_at) "
        "VALUES ($1::bytea, $2::bigint, $3::numeric, 1, $5, true, {1}) ON CONFLICT (job_key) DO UPDATE SET "
        "instant_us = EXCLUDED.instant_us, schedule_digest = EXCLUDED.schedule_digest, version = 1, "
        "claimant = EXCLUDED.claimant, moved = true, expires_at = EXCLUDED.expires_at WHERE c.expires_at <= now() "
        "RETURNING {2}",
        t.cursors(), expiry("$4"), cursor_columns);
    catch_up_seen = fmt::format(
        "UPDATE {0} SET instant_us = $2::bigint, schedule_digest = $3::numeric, version = version + 1, claimant = $5, "
        "moved = true, expires_at = {1} WHERE job_key = $1::bytea AND expires_at > now() AND instant_us = $6::bigint "
        "AND "
        "schedule_digest = $7::numeric AND version = $8::bigint AND claimant = $9 RETURNING {2}",
        t.cursors(), expiry("$4"), cursor_columns);
    lock_ledger = "SELECT pg_advisory_xact_lock($1::bigint)";
    drop_expired_ledger = fmt::format(
        "DELETE FROM {0} WHERE job_key = $1::bytea AND EXISTS (SELECT 1 FROM {1} WHERE job_key = $1::bytea AND "
        "expires_at <= now())",
        t.ledger(), t.ledgers());
    write_record = fmt::format(
        "INSERT INTO {} AS l (job_key, fire_key, scheduled_us, rank, record) VALUES ($1::bytea, $2::bytea, $3::bigint, "
        "$4::integer, $5::bytea) "
        "ON CONFLICT (job_key, fire_key) DO UPDATE SET scheduled_us = EXCLUDED.scheduled_us, rank = EXCLUDED.rank, "
        "record = EXCLUDED.record WHERE l.rank < EXCLUDED.rank RETURNING 1",
        t.ledger());
    keep_recent = fmt::format(
        "DELETE FROM {0} WHERE job_key = $1::bytea AND scheduled_us < "
        "LEAST((SELECT max(scheduled_us) FROM {0} WHERE job_key = $1::bytea), {1}) - $2::bigint",
        t.ledger(), server_now_us);
    keep_count = fmt::format(
        "DELETE FROM {0} WHERE job_key = $1::bytea AND fire_key IN (SELECT fire_key FROM {0} WHERE job_key = $1::bytea "
        "ORDER BY scheduled_us DESC, fire_key DESC OFFSET $2::bigint)",
        t.ledger());
    touch_ledger = fmt::format(
        "INSERT INTO {} (job_key, expires_at) VALUES ($1::bytea, {}) ON CONFLICT (job_key) DO UPDATE SET "
        "expires_at = EXCLUDED.expires_at",
        t.ledgers(), expiry("$2"));
    read_ledger = fmt::format(
        "SELECT l.record FROM {} l JOIN {} g ON g.job_key = l.job_key AND g.expires_at > now() WHERE l.job_key = "
        "$1::bytea "
        "ORDER BY l.scheduled_us DESC, l.fire_key DESC LIMIT $2::bigint",
        t.ledger(), t.ledgers());
    const std::string lifetime = "CASE WHEN $3::bigint = 0 THEN NULL ELSE " + expiry("$3") + " END";
    load = fmt::format("SELECT body, revision FROM {} WHERE name = $1 AND (expires_at IS NULL OR expires_at > now())",
                       t.documents());
    replace_seen = fmt::format(
        "UPDATE {} SET body = $2, revision = revision + 1, expires_at = {} WHERE name = $1 AND revision = $4::bigint "
        "AND body = $5 AND (expires_at IS NULL OR expires_at > now())",
        t.documents(), lifetime);
    replace_absent = fmt::format(
        "INSERT INTO {0} AS d (name, body, revision, expires_at) VALUES ($1, $2, 1, {1}) ON CONFLICT (name) DO UPDATE "
        "SET body = EXCLUDED.body, revision = d.revision + 1, expires_at = EXCLUDED.expires_at "
        "WHERE d.expires_at IS NOT NULL AND d.expires_at <= now()",
        t.documents(), lifetime);
  }

  /// The lock that makes a job's ledger rows one writer's at a time: an
  /// advisory lock named by the table and the job (a collision only
  /// serialises two jobs' writers).
  [[nodiscard]] std::int64_t ledger_lock_id(std::string_view job_key) const {
    return static_cast<std::int64_t>(fleetcron::detail::fnv1a(job_key, fleetcron::detail::fnv1a(options.tables.ledger() + '\n')));
  }
  /// The writes' indexes grouped by job (each group in the order given),
  /// the groups in the order of their locks: every writer takes the locks
  /// of a batch in one order, so writers of the same jobs wait for each
  /// other and never deadlock.
  [[nodiscard]] std::vector<std::vector<std::size_t>> jobs_in_lock_order(std::span<const LedgerWrite> writes) const;
  void record_job(detail::Session& session, std::span<const LedgerWrite> writes, std::span<const std::size_t> indexes,
                  std::vector<LedgerWriteResult>& out);

  std::shared_ptr<Connection> connection;
  FleetStateOptions options;
  std::string read_cursor, read_cursors, advance, catch_up_new, catch_up_seen;
  std::string lock_ledger, drop_expired_ledger, write_record, keep_recent, keep_count, touch_ledger, read_ledger;
  std::string load, replace_seen, replace_absent;
};

FleetState::FleetState(std::shared_ptr<Connection> connection, FleetStateOptions options) {
  if (!connection) throw std::invalid_argument("postgres::FleetState: connection is null");
  check_table_names(options.tables);
  impl_ = std::make_unique<Impl>(std::move(connection), std::move(options));
}

FleetState::~FleetState() = default;
const FleetStateOptions& FleetState::options() const noexcept { return impl_->options; }

CursorRead FleetState::read_cursor(std::string_view job_key) {
  check_job_key(job_key);
  try {
    const detail::Rows rows = impl_->connection->pool().exec(impl_->read_cursor, {detail::to_bytea(job_key)});
    if (rows.empty()) return {CursorRead::Status::absent, std::nullopt, {}};
    return {CursorRead::Status::found, cursor_of(rows, 0), {}};
  } catch (const std::exception& e) {
    return {CursorRead::Status::error, std::nullopt, e.what()};
  }
}

std::vector<CursorRead> FleetState::read_cursors(std::span<const std::string> job_keys) {
  std::vector<std::string> hex;
  hex.reserve(job_keys.size());
  for (const auto& key : job_keys) {
    check_job_key(key);
    hex.push_back(detail::to_bytea(key));
  }
  std::vector<CursorRead> answers(job_keys.size(), CursorRead{CursorRead::Status::absent, std::nullopt, {}});
  if (job_keys.empty()) return answers;
  try {
    const detail::Rows rows = impl_->connection->pool().exec(impl_->read_cursors, {detail::text_array(hex)});
    std::map<std::string, JobCursor, std::less<>> found;
    for (std::size_t r = 0; r < rows.rows.size(); ++r) found.emplace(detail::from_bytea(rows.text(r, 4)), cursor_of(rows, r));
    for (std::size_t i = 0; i < job_keys.size(); ++i) {
      if (const auto it = found.find(job_keys[i]); it != found.end()) answers[i] = {CursorRead::Status::found, it->second, {}};
    }
  } catch (const std::exception& e) {
    for (auto& answer : answers) answer = {CursorRead::Status::error, std::nullopt, e.what()};
  }
  return answers;
}

CursorAdvance FleetState::advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                         std::chrono::nanoseconds keep_for) {
  check_cursor_arguments(job_key, keep_for);
  try {
    const detail::Rows rows = impl_->connection->pool().exec(
        impl_->advance,
        {detail::to_bytea(job_key), micros_text(instant), std::to_string(schedule_digest), micros_text(keep_for)});
    const bool moved = rows.text(0, 4) == "t";
    return {moved ? CursorAdvance::Status::moved : CursorAdvance::Status::already_past, cursor_of(rows, 0), {}};
  } catch (const std::exception& e) {
    return {CursorAdvance::Status::error, std::nullopt, e.what()};
  }
}

CatchUpClaim FleetState::claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen, Instant instant,
                                        std::uint64_t schedule_digest, std::chrono::nanoseconds keep_for,
                                        std::string_view claimant) {
  check_catch_up_arguments(job_key, keep_for, seen, instant, claimant);
  try {
    detail::Params params{detail::to_bytea(job_key), micros_text(instant), std::to_string(schedule_digest),
                          micros_text(keep_for), std::string(claimant)};
    detail::Rows rows;
    if (!seen) {
      rows = impl_->connection->pool().exec(impl_->catch_up_new, params);
    } else if (seen->epoch.empty()) {  // this store writes no epoch: a cursor with one is not ours
      params.insert(params.end(), {micros_text(seen->instant), std::to_string(seen->schedule_digest),
                                   std::to_string(seen->version), seen->claimant});
      rows = impl_->connection->pool().exec(impl_->catch_up_seen, params);
    }
    if (!rows.empty()) return {CatchUpClaim::Status::claimed, cursor_of(rows, 0), {}};
  } catch (const std::exception& e) {
    return {CatchUpClaim::Status::error, std::nullopt, e.what()};
  }
  const CursorRead now = read_cursor(job_key);
  if (now.status == CursorRead::Status::error) return {CatchUpClaim::Status::error, std::nullopt, now.error};
  return {CatchUpClaim::Status::superseded, now.cursor, {}};
}

std::vector<std::vector<std::size_t>> FleetState::Impl::jobs_in_lock_order(std::span<const LedgerWrite> writes) const {
  std::vector<std::pair<std::int64_t, std::vector<std::size_t>>> jobs;  // lock id, indexes
  std::vector<bool> done(writes.size(), false);
  for (std::size_t first = 0; first < writes.size(); ++first) {
    if (done[first]) continue;
    auto& [lock, indexes] = jobs.emplace_back(ledger_lock_id(writes[first].record.job_key), std::vector<std::size_t>{});
    for (std::size_t i = first; i < writes.size(); ++i) {
      if (!done[i] && writes[i].record.job_key == writes[first].record.job_key) {
        done[i] = true;
        indexes.push_back(i);
      }
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<std::size_t>> out;
  out.reserve(jobs.size());
  for (auto& job : jobs) out.push_back(std::move(job.second));
  return out;
}

void FleetState::Impl::record_job(detail::Session& session, std::span<const LedgerWrite> writes,
                                  std::span<const std::size_t> indexes, std::vector<LedgerWriteResult>& out) {
  const std::string job_key = detail::to_bytea(writes[indexes.front()].record.job_key);
  // Until the transaction ends, this job's ledger rows are this writer's.
  (void)session.exec(lock_ledger, {std::to_string(ledger_lock_id(writes[indexes.front()].record.job_key))});
  (void)session.exec(drop_expired_ledger, {job_key});
  for (const std::size_t i : indexes) {
    const LedgerWrite& write = writes[i];
    const FireRecord& record = write.record;
    const detail::Rows written =
        session.exec(write_record, {job_key, detail::to_bytea(record.fire_key), micros_text(record.scheduled_at),
                                    std::to_string(ledger_rank(record)), detail::to_bytea(format_fire_record(record))});
    if (written.empty()) {
      out[i] = {LedgerWriteResult::Status::outranked, {}};
      continue;
    }
    (void)session.exec(keep_recent, {job_key, micros_text(write.retention.keep_for)});
    (void)session.exec(keep_count, {job_key, std::to_string(write.retention.keep_count)});
    (void)session.exec(touch_ledger, {job_key, micros_text(write.retention.keep_for)});
    out[i] = {LedgerWriteResult::Status::written, {}};
  }
}

std::vector<LedgerWriteResult> FleetState::record_fires(std::span<const LedgerWrite> writes) {
  check_ledger_writes(writes);
  std::vector<LedgerWriteResult> results(writes.size());
  if (writes.empty()) return results;
  try {
    impl_->connection->pool().transaction([&](detail::Session& session) {
      for (const std::vector<std::size_t>& indexes : impl_->jobs_in_lock_order(writes)) {
        impl_->record_job(session, writes, indexes, results);
      }
    });
  } catch (const std::exception& e) {
    for (auto& result : results) result = {LedgerWriteResult::Status::error, e.what()};  // rolled back: none kept
  }
  return results;
}

LedgerRead FleetState::read_fires(std::string_view job_key, std::size_t limit) {
  check_ledger_read(job_key, limit);
  try {
    const detail::Rows rows =
        impl_->connection->pool().exec(impl_->read_ledger, {detail::to_bytea(job_key), std::to_string(limit)});
    LedgerRead out{LedgerRead::Status::found, {}, {}};
    for (std::size_t r = 0; r < rows.rows.size(); ++r) {
      const std::string text = detail::from_bytea(rows.text(r, 0));
      std::optional<FireRecord> record = parse_fire_record(text);
      if (!record) {
        return {
            LedgerRead::Status::error,
            {},
            fmt::format("{}: a row of {} for job \"{}\" holds \"{}\", not a fire record", impl_->connection->describe(),
                        impl_->options.tables.ledger(), job_key, text.substr(0, 64))};
      }
      out.records.push_back(std::move(*record));
    }
    return out;
  } catch (const std::exception& e) {
    return {LedgerRead::Status::error, {}, e.what()};
  }
}

std::optional<Instant> FleetState::store_now() {
  try {
    const detail::Rows rows = impl_->connection->pool().exec(fmt::format("SELECT {}", server_now_us), {});
    if (rows.empty()) return std::nullopt;
    return Instant{std::chrono::microseconds{std::stoll(rows.text(0, 0))}};
  } catch (...) {
    return std::nullopt;  // unreachable
  }
}

FleetState::StoredDocument FleetState::load_document(DocumentId which) {
  try {
    const detail::Rows rows = impl_->connection->pool().exec(impl_->load, {document_name(which)});
    if (rows.empty()) return {StoredDocument::Status::absent, {}, 0, {}};
    return {StoredDocument::Status::found, rows.text(0, 0), std::stoull(rows.text(0, 1)), {}};
  } catch (const std::exception& e) {
    return {StoredDocument::Status::error, {}, 0, e.what()};
  }
}

FleetState::DocumentReplace FleetState::replace_document(DocumentId which, const StoredDocument& seen,
                                                         const std::string& text, std::chrono::nanoseconds keep_for) {
  try {
    detail::Params params{document_name(which), text, micros_text(keep_for)};
    const bool found = seen.status == StoredDocument::Status::found;
    if (found) params.insert(params.end(), {std::to_string(seen.revision), seen.text});
    const detail::Rows rows =
        impl_->connection->pool().exec(found ? impl_->replace_seen : impl_->replace_absent, params);
    return {rows.affected > 0 ? DocumentReplace::Status::written : DocumentReplace::Status::conflict, {}};
  } catch (const std::exception& e) {
    return {DocumentReplace::Status::error, e.what()};
  }
}

}  // namespace fleetcron::postgres
