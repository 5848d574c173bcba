#include "fleetcron/nats/fleet_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "fleetcron/duration.h"
#include "fleetcron/nats/claimer.h"
#include "fleetcron/store_clock.h"
#include "nats/status.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron::nats {

namespace {

// Compare-and-swap rounds before an operation gives up: each lost round
// means another replica wrote the cursor in between.
constexpr int max_rounds = 16;
// The key store_now() writes to read the server's time.
constexpr std::string_view clock_key = "clock";

JobCursor record(Instant instant, std::uint64_t digest, std::uint64_t version, std::string_view claimant) {
  return JobCursor{cursor_instant(instant), digest, version, std::string(claimant), {}};
}

}  // namespace

BucketConfig state_bucket_config(std::string name) {
  return BucketConfig{.name = std::move(name), .ttl = max_cursor_keep_for};
}

class FLEETCRON_LOCAL FleetState::Impl {
 public:
  explicit Impl(std::shared_ptr<Bucket> state_bucket) : bucket(std::move(state_bucket)) {}

  /// A job's key as it is read: the entry (nullopt: absent) and its cursor.
  struct Read {
    std::optional<Entry> entry;
    std::optional<JobCursor> cursor;
    std::string error;  // not empty: the read failed, or the value is not a cursor
  };

  /// Runs `operation` on the bucket; a bucket found missing is created
  /// again and the operation tried once more. Failures throw BackendError.
  template <typename Operation>
  auto on_bucket(Operation&& operation) -> decltype(operation()) {
    try {
      return operation();
    } catch (const BackendError& e) {
      if (!detail::missing(e)) throw;
      bucket->recreate();
      return operation();
    }
  }

  /// A key's entry (nullopt: absent), or an error message.
  struct Fetched {
    std::optional<Entry> entry;
    std::string error;
  };

  Read read(const std::string& key) {
    Fetched fetched = fetch(key);
    Read out{std::move(fetched.entry), std::nullopt, std::move(fetched.error)};
    if (!out.error.empty() || !out.entry) return out;
    out.cursor = parse_cursor_record(out.entry->value);
    if (!out.cursor) {
      out.error = fmt::format("bucket {}: {} holds \"{}\", not a cursor "
                              "(\"<instant µs> <digest> <version> <claimant> [<epoch>]\")",
                              bucket->name(), key, out.entry->value.substr(0, 64));
    }
    return out;
  }

  Fetched fetch(const std::string& key) {
    Fetched out;
    try {
      out.entry = on_bucket([&] { return bucket->get(key); });  // a deleted stream answers so: recreated
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  }

  /// Writes `value` if the key is still at `entry` (nullopt: absent, so
  /// created); the new revision, nullopt if another writer came first.
  std::optional<std::uint64_t> write(const std::string& key, const std::optional<Entry>& entry,
                                     const std::string& value) {
    return on_bucket([&] {
      return entry ? bucket->update(key, value, entry->revision) : bucket->create(key, value);
    });
  }
  std::optional<std::uint64_t> write(const std::string& key, const Read& read, const std::string& value) {
    return write(key, read.entry, value);
  }

  /// The records of the ledger value `value` of `key`, or an error.
  std::pair<std::vector<FireRecord>, std::string> parse_ledger(const std::string& key, std::string_view value) const {
    std::vector<FireRecord> records;
    while (!value.empty()) {
      const auto end = value.find('\n');
      const std::string_view line = value.substr(0, end);
      std::optional<FireRecord> record = parse_fire_record(line);
      if (!record) {
        return {{}, fmt::format("bucket {}: {} holds \"{}\", not a fire record", bucket->name(), key,
                                line.substr(0, 64))};
      }
      records.push_back(std::move(*record));
      value.remove_prefix(end == std::string_view::npos ? value.size() : end + 1);
    }
    return {std::move(records), {}};
  }

  /// `records` as one value, newest first; the oldest are left out as
  /// long as it would be longer than max_ledger_value_bytes.
  static std::string format_ledger(std::vector<FireRecord>& records) {
    std::vector<std::string> lines;
    std::size_t bytes = 0;
    for (const auto& record : records) {
      std::string line = format_fire_record(record);
      if (bytes + line.size() + 1 > FleetState::max_ledger_value_bytes) break;
      bytes += line.size() + 1;
      lines.push_back(std::move(line));
    }
    records.resize(lines.size());
    return fmt::format("{}", fmt::join(lines, "\n"));
  }

  std::vector<LedgerWriteResult> record_job(const std::string& key, std::span<const LedgerWrite> writes,
                                            Instant store_now);

  /// Why this key or keep_for cannot be kept in the bucket; empty if it can.
  std::string refuse(const std::string& key, std::chrono::nanoseconds keep_for) {
    if (key.size() > max_key_bytes) {
      return fmt::format("bucket {}: the cursor key encodes to {} bytes, above the {}-byte limit for NATS keys",
                         bucket->name(), key.size(), max_key_bytes);
    }
    try {
      const auto ttl = bucket->ttl();
      if (ttl > std::chrono::nanoseconds::zero() && ttl < keep_for) {
        return fmt::format("bucket {} keeps values {}, less than the {} this cursor must live: create it with {}",
                           bucket->name(), format_duration(ttl), format_duration(keep_for),
                           format_duration(max_cursor_keep_for));
      }
    } catch (const std::exception& e) {
      return e.what();
    }
    return {};
  }

  std::shared_ptr<Bucket> bucket;
  std::unique_ptr<StoreClock> clock;  // the server's time, for the ledgers' retention
};

std::vector<LedgerWriteResult> FleetState::Impl::record_job(const std::string& key,
                                                            std::span<const LedgerWrite> writes, Instant store_now) {
  const auto failed = [&](std::string error) {
    return std::vector<LedgerWriteResult>(writes.size(), LedgerWriteResult{LedgerWriteResult::Status::error, error});
  };
  if (key.size() > max_key_bytes) {
    return failed(fmt::format("bucket {}: the ledger key encodes to {} bytes, above the {}-byte limit for NATS keys",
                              bucket->name(), key.size(), max_key_bytes));
  }
  try {
    for (int round = 0; round < max_rounds; ++round) {
      Fetched fetched = fetch(key);
      if (!fetched.error.empty()) return failed(std::move(fetched.error));
      auto [records, error] = fetched.entry ? parse_ledger(key, fetched.entry->value)
                                            : std::pair<std::vector<FireRecord>, std::string>{};
      if (!error.empty()) return failed(std::move(error));
      std::vector<LedgerWriteResult> results = apply_ledger_writes(records, writes, store_now);
      const bool changed = std::any_of(results.begin(), results.end(), [](const LedgerWriteResult& r) {
        return r.status == LedgerWriteResult::Status::written;
      });
      if (!changed) return results;
      const std::string value = format_ledger(records);  // may leave out the oldest records
      if (!write(key, fetched.entry, value)) continue;
      for (std::size_t i = 0; i < results.size(); ++i) {
        const bool kept = std::any_of(records.begin(), records.end(),
                                      [&](const FireRecord& r) { return r.fire_key == writes[i].record.fire_key; });
        if (results[i].status == LedgerWriteResult::Status::written && !kept) {
          results[i].status = LedgerWriteResult::Status::let_go;
        }
      }
      return results;
    }
  } catch (const std::exception& e) {
    return failed(e.what());
  }
  return failed(fmt::format("bucket {}: {} kept changing under {} compare-and-swaps", bucket->name(), key, max_rounds));
}

FleetState::FleetState(std::shared_ptr<Bucket> bucket) {
  if (!bucket) throw std::invalid_argument("nats::FleetState: bucket is null");
  impl_ = std::make_unique<Impl>(std::move(bucket));
  impl_->clock = std::make_unique<StoreClock>(*this, system_clock(), std::chrono::seconds{30});
}

FleetState::~FleetState() = default;

std::string FleetState::cursor_key(std::string_view job_key) { return "cursor." + encode_key(job_key); }

CursorRead FleetState::read_cursor(std::string_view job_key) {
  check_job_key(job_key);
  const Impl::Read read = impl_->read(cursor_key(job_key));
  if (!read.error.empty()) return {CursorRead::Status::error, std::nullopt, read.error};
  if (!read.entry) return {CursorRead::Status::absent, std::nullopt, {}};
  return {CursorRead::Status::found, read.cursor, {}};
}

CursorAdvance FleetState::advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                         std::chrono::nanoseconds keep_for) {
  check_cursor_arguments(job_key, keep_for);
  const std::string key = cursor_key(job_key);
  if (std::string refused = impl_->refuse(key, keep_for); !refused.empty()) {
    return {CursorAdvance::Status::error, std::nullopt, std::move(refused)};
  }
  try {
    for (int round = 0; round < max_rounds; ++round) {
      const Impl::Read read = impl_->read(key);
      if (!read.error.empty()) return {CursorAdvance::Status::error, std::nullopt, read.error};
      if (read.cursor && read.cursor->instant >= cursor_instant(instant)) {
        // Already past: the same record again, so it lives the TTL from now.
        if (impl_->write(key, read, read.entry->value)) return {CursorAdvance::Status::already_past, read.cursor, {}};
        continue;
      }
      const JobCursor next = record(instant, schedule_digest, read.cursor ? read.cursor->version + 1 : 1, {});
      if (impl_->write(key, read, format_cursor_record(next))) return {CursorAdvance::Status::moved, next, {}};
    }
  } catch (const std::exception& e) {
    return {CursorAdvance::Status::error, std::nullopt, e.what()};
  }
  return {CursorAdvance::Status::error, std::nullopt,
          fmt::format("bucket {}: {} kept changing under {} compare-and-swaps", impl_->bucket->name(), key, max_rounds)};
}

CatchUpClaim FleetState::claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                        Instant instant, std::uint64_t schedule_digest,
                                        std::chrono::nanoseconds keep_for, std::string_view claimant) {
  check_catch_up_arguments(job_key, keep_for, seen, instant, claimant);
  const std::string key = cursor_key(job_key);
  if (std::string refused = impl_->refuse(key, keep_for); !refused.empty()) {
    return {CatchUpClaim::Status::error, std::nullopt, std::move(refused)};
  }
  try {
    for (int round = 0; round < max_rounds; ++round) {
      const Impl::Read read = impl_->read(key);
      if (!read.error.empty()) return {CatchUpClaim::Status::error, std::nullopt, read.error};
      // The whole record, not the revision: a refresh rewrites the same
      // content under a new revision and must not look like a move.
      if (read.cursor != seen) return {CatchUpClaim::Status::superseded, read.cursor, {}};
      const JobCursor next = record(instant, schedule_digest, seen ? seen->version + 1 : 1, claimant);
      if (impl_->write(key, read, format_cursor_record(next))) return {CatchUpClaim::Status::claimed, next, {}};
    }
  } catch (const std::exception& e) {
    return {CatchUpClaim::Status::error, std::nullopt, e.what()};
  }
  return {CatchUpClaim::Status::error, std::nullopt,
          fmt::format("bucket {}: {} kept changing under {} compare-and-swaps", impl_->bucket->name(), key, max_rounds)};
}

std::string FleetState::ledger_key(std::string_view job_key) { return "ledger." + encode_key(job_key); }

std::vector<LedgerWriteResult> FleetState::record_fires(std::span<const LedgerWrite> writes) {
  check_ledger_writes(writes);
  // Each job's writes in one compare-and-swap of its ledger, in the order given.
  std::vector<LedgerWriteResult> results(writes.size());
  std::vector<bool> done(writes.size(), false);
  const Instant store_now = impl_->clock->now();
  for (std::size_t first = 0; first < writes.size(); ++first) {
    if (done[first]) continue;
    std::vector<std::size_t> indexes;
    std::vector<LedgerWrite> job_writes;
    for (std::size_t i = first; i < writes.size(); ++i) {
      if (done[i] || writes[i].record.job_key != writes[first].record.job_key) continue;
      done[i] = true;
      indexes.push_back(i);
      job_writes.push_back(writes[i]);
    }
    const auto job_results = impl_->record_job(ledger_key(writes[first].record.job_key), job_writes, store_now);
    for (std::size_t i = 0; i < indexes.size(); ++i) results[indexes[i]] = job_results[i];
  }
  return results;
}

bool FleetState::may_lose_concurrent_updates() {
  try {
    return impl_->bucket->replicas() != 1;
  } catch (const std::exception&) {
    return true;  // unknown: the safe side, a read-back that finds nothing missing
  }
}

LedgerRead FleetState::read_fires(std::string_view job_key, std::size_t limit) {
  check_ledger_read(job_key, limit);
  const std::string key = ledger_key(job_key);
  Impl::Fetched fetched = impl_->fetch(key);
  if (!fetched.error.empty()) return {LedgerRead::Status::error, {}, std::move(fetched.error)};
  if (!fetched.entry) return {LedgerRead::Status::found, {}, {}};
  auto [records, error] = impl_->parse_ledger(key, fetched.entry->value);
  if (!error.empty()) return {LedgerRead::Status::error, {}, std::move(error)};
  if (records.size() > limit) records.resize(limit);
  return {LedgerRead::Status::found, std::move(records), {}};
}

std::string FleetState::document_key(DocumentId which) { return document_name(which); }

std::optional<Instant> FleetState::store_now() {
  try {
    return impl_->on_bucket([&] {
      const std::uint64_t revision = impl_->bucket->put(clock_key, "clock");
      return Instant{std::chrono::duration_cast<Instant::duration>(
          impl_->bucket->write_times(revision).written.time_since_epoch())};
    });
  } catch (...) {
    return std::nullopt;  // unreachable
  }
}

FleetState::StoredDocument FleetState::load_document(DocumentId which) {
  Impl::Fetched fetched = impl_->fetch(document_key(which));
  if (!fetched.error.empty()) return {StoredDocument::Status::error, {}, 0, std::move(fetched.error)};
  if (!fetched.entry) return {StoredDocument::Status::absent, {}, 0, {}};
  return {StoredDocument::Status::found, std::move(fetched.entry->value), fetched.entry->revision, {}};
}

FleetState::DocumentReplace FleetState::replace_document(DocumentId which, const StoredDocument& seen,
                                                         const std::string& text, std::chrono::nanoseconds) {
  const std::string key = document_key(which);
  std::optional<Entry> entry;
  if (seen.status == StoredDocument::Status::found) {
    entry.emplace();
    entry->key = key;
    entry->revision = seen.revision;  // all a compare-and-swap needs
  }
  try {
    if (impl_->write(key, entry, text)) return {DocumentReplace::Status::written, {}};
    return {DocumentReplace::Status::conflict, {}};
  } catch (const std::exception& e) {
    return {DocumentReplace::Status::error, e.what()};
  }
}

}  // namespace fleetcron::nats
