#include "fleetcron/redis/fleet_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "redis/commands.h"
#include "redis/scripts.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron::redis {

namespace {

const Script& advance_script() {
  static const Script script(detail::advance_cursor_script);
  return script;
}

const Script& catch_up_script() {
  static const Script script(detail::catch_up_script);
  return script;
}

const Script& record_fires_script() {
  static const Script script(detail::record_fires_script);
  return script;
}

const Script& replace_document_script() {
  static const Script script(detail::replace_document_script);
  return script;
}

const Script& read_fires_script() {
  static const Script script(detail::read_fires_script);
  return script;
}

std::int64_t micros_of(Instant at) { return cursor_instant(at).time_since_epoch().count() / 1000; }

std::string keep_ms(std::chrono::nanoseconds keep_for) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(keep_for).count());
}

std::string keep_us(std::chrono::nanoseconds keep_for) {
  return std::to_string(std::chrono::floor<std::chrono::microseconds>(keep_for).count());
}

// A script's {flag, value} answer; nullopt if it is not that.
std::optional<std::pair<std::int64_t, std::string>> flagged(const Reply& reply) {
  if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::integer || reply.elements[1].type != Reply::Type::string) {
    return std::nullopt;
  }
  return std::pair{reply.elements[0].integer, reply.elements[1].text};
}

}  // namespace

class FLEETCRON_LOCAL FleetState::Impl {
 public:
  Impl(std::shared_ptr<Client> client, FleetStateOptions options)
      : client_(std::move(client)), options_(std::move(options)) {}

  std::string cursor_key(std::string_view job_key) const {
    return fmt::format("{}cursor:{{{}}}", options_.fleet_prefix, job_key);
  }
  std::string ledger_index_key(std::string_view job_key) const {
    return fmt::format("{}ledger:{{{}}}", options_.fleet_prefix, job_key);
  }
  std::string ledger_records_key(std::string_view job_key) const {
    return fmt::format("{}ledger-records:{{{}}}", options_.fleet_prefix, job_key);
  }

  /// The record script's answer to one record as a result.
  LedgerWriteResult recorded(const FireRecord& record, const Reply& reply) const {
    if (reply.is_error() || reply.type == Reply::Type::string) {
      return {LedgerWriteResult::Status::error,
              fmt::format("{}: fire {} not recorded: {}", client_->describe(), record.fire_key, reply.text)};
    }
    if (reply.type != Reply::Type::integer) {
      return {LedgerWriteResult::Status::error,
              fmt::format("{}: the ledger script answered {}", client_->describe(), to_string(reply.type))};
    }
    return {reply.integer >= 1 ? LedgerWriteResult::Status::written : LedgerWriteResult::Status::outranked, {}};
  }

  /// Whether a write to the job's ledger now should set its keys' life:
  /// not when this process set it less than ledger_life_refresh ago.
  bool life_due(const std::string& job_key, std::chrono::steady_clock::time_point now,
                std::chrono::nanoseconds refresh) {
    std::lock_guard guard(life_mutex_);
    const auto it = life_set_.find(job_key);
    return it == life_set_.end() || now - it->second >= refresh;
  }
  void life_was_set(const std::string& job_key, std::chrono::steady_clock::time_point at) {
    std::lock_guard guard(life_mutex_);
    if (life_set_.size() >= FleetState::max_ledger_lives_kept) life_set_.clear();  // each job's is set again once
    life_set_[job_key] = at;
  }

  /// Runs `script` on the job's cursor; the reply, or an error message.
  std::pair<Reply, std::string> run(const Script& script, std::string_view job_key,
                                    std::span<const std::string> args) {
    const std::array<std::string, 1> keys{cursor_key(job_key)};
    try {
      Reply reply = client_->impl().eval(script, keys, args);
      if (reply.is_error()) return {{}, fmt::format("{}: {}", client_->describe(), reply.text)};
      return {std::move(reply), {}};
    } catch (const std::exception& e) {
      return {{}, e.what()};  // fail closed: the caller answers with an error
    }
  }

  /// The cursor in `value`, or an error naming the key.
  /// A GET of the job's cursor key, as read_cursor() answers it.
  CursorRead cursor_of(std::string_view job_key, const Reply& reply) const {
    if (reply.is_nil()) return {CursorRead::Status::absent, std::nullopt, {}};
    if (reply.type != Reply::Type::string) {
      return {CursorRead::Status::error, std::nullopt,
              fmt::format("{}: GET {} answered {}", client_->describe(), cursor_key(job_key),
                          reply.is_error() ? reply.text : std::string(to_string(reply.type)))};
    }
    auto [cursor, error] = decode(job_key, reply.text);
    if (!cursor) return {CursorRead::Status::error, std::nullopt, std::move(error)};
    return {CursorRead::Status::found, cursor, {}};
  }

  std::pair<std::optional<JobCursor>, std::string> decode(std::string_view job_key, std::string_view value) const {
    if (std::optional<JobCursor> cursor = parse_cursor_record(value)) return {cursor, {}};
    return {std::nullopt,
            fmt::format("{}: {} holds \"{}\", not a cursor (\"<instant µs> <digest> <version> <claimant> [<epoch>]\")",
                        client_->describe(), cursor_key(job_key), value.substr(0, 64))};
  }

  /// The advance script's answer as a result.
  CursorAdvance advanced(std::string_view job_key, const Reply& reply) const {
    if (reply.is_error()) {
      return {CursorAdvance::Status::error, std::nullopt, fmt::format("{}: {}", client_->describe(), reply.text)};
    }
    const auto answer = flagged(reply);
    if (!answer) {
      return {CursorAdvance::Status::error, std::nullopt,
              fmt::format("{}: the cursor script answered {}", client_->describe(), to_string(reply.type))};
    }
    auto [cursor, decode_error] = decode(job_key, answer->second);
    if (!cursor) return {CursorAdvance::Status::error, std::nullopt, std::move(decode_error)};
    return {answer->first == 1 ? CursorAdvance::Status::moved : CursorAdvance::Status::already_past, cursor, {}};
  }

  std::shared_ptr<Client> client_;
  FleetStateOptions options_;
  std::mutex life_mutex_;  // guards life_set_
  // Job key → when this process last set its ledger keys' life.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> life_set_;
};

FleetState::FleetState(std::shared_ptr<Client> client, FleetStateOptions options) {
  if (!client) throw std::invalid_argument("redis::FleetState: client is null");
  if (options.fleet_prefix.empty()) throw std::invalid_argument("redis::FleetStateOptions.fleet_prefix: empty");
  impl_ = std::make_unique<Impl>(std::move(client), std::move(options));
}

FleetState::~FleetState() = default;

const FleetStateOptions& FleetState::options() const noexcept { return impl_->options_; }

std::string FleetState::cursor_key(std::string_view job_key) const { return impl_->cursor_key(job_key); }

CursorRead FleetState::read_cursor(std::string_view job_key) {
  check_job_key(job_key);
  Reply reply;
  try {
    reply = impl_->client_->impl().command({"GET", impl_->cursor_key(job_key)});
  } catch (const std::exception& e) {
    return {CursorRead::Status::error, std::nullopt, e.what()};
  }
  return impl_->cursor_of(job_key, reply);
}

std::vector<CursorRead> FleetState::read_cursors(std::span<const std::string> job_keys) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(job_keys.size());
  for (const auto& key : job_keys) {
    check_job_key(key);
    commands.push_back({"GET", impl_->cursor_key(key)});
  }
  std::vector<CursorRead> answers;
  answers.reserve(job_keys.size());
  std::vector<Reply> replies;
  try {
    replies = impl_->client_->impl().pipeline(commands);
  } catch (const std::exception& e) {
    for (std::size_t i = 0; i < job_keys.size(); ++i) answers.push_back({CursorRead::Status::error, std::nullopt, e.what()});
    return answers;
  }
  for (std::size_t i = 0; i < job_keys.size(); ++i) answers.push_back(impl_->cursor_of(job_keys[i], replies.at(i)));
  return answers;
}

CursorAdvance FleetState::advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                         std::chrono::nanoseconds keep_for) {
  const CursorAdvanceRequest request{job_key, instant, schedule_digest, keep_for};
  return advance_cursors(std::span(&request, 1)).front();
}

std::vector<CursorAdvance> FleetState::advance_cursors(std::span<const CursorAdvanceRequest> requests) {
  std::vector<std::string> keys, args;
  keys.reserve(requests.size());
  args.reserve(3 * requests.size());
  for (const auto& request : requests) {
    check_cursor_arguments(request.job_key, request.keep_for);
    keys.push_back(impl_->cursor_key(request.job_key));
    args.push_back(std::to_string(micros_of(request.instant)));
    args.push_back(std::to_string(request.schedule_digest));
    args.push_back(keep_ms(request.keep_for));
  }
  std::vector<CursorAdvance> answers;
  answers.reserve(requests.size());
  if (requests.empty()) return answers;
  Reply reply;
  try {
    reply = impl_->client_->impl().eval(advance_script(), keys, args);  // one call for the batch
  } catch (const std::exception& e) {
    answers.assign(requests.size(), CursorAdvance{CursorAdvance::Status::error, std::nullopt, e.what()});
    return answers;
  }
  if (reply.type != Reply::Type::array || reply.elements.size() != requests.size()) {
    const std::string error = reply.is_error() ? fmt::format("{}: {}", impl_->client_->describe(), reply.text)
                                               : fmt::format("{}: the cursor script answered {} for {} cursors",
                                                             impl_->client_->describe(), to_string(reply.type),
                                                             requests.size());
    answers.assign(requests.size(), CursorAdvance{CursorAdvance::Status::error, std::nullopt, error});
    return answers;
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Reply& one = reply.elements[i];
    const bool refused = one.type == Reply::Type::array && one.elements.size() == 2 &&
                         one.elements[0].type == Reply::Type::integer && one.elements[0].integer == -1;
    if (refused) one = Reply{Reply::Type::error, fmt::format("{}: {}", keys[i], one.elements[1].text), 0, {}};
    answers.push_back(impl_->advanced(requests[i].job_key, one));
  }
  return answers;
}

CatchUpClaim FleetState::claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                        Instant instant, std::uint64_t schedule_digest,
                                        std::chrono::nanoseconds keep_for, std::string_view claimant) {
  check_catch_up_arguments(job_key, keep_for, seen, instant, claimant);
  const std::array<std::string, 5> args{seen ? format_cursor_record(*seen) : std::string(),
                                        std::to_string(micros_of(instant)), std::to_string(schedule_digest),
                                        keep_ms(keep_for), std::string(claimant)};
  auto [reply, error] = impl_->run(catch_up_script(), job_key, args);
  if (!error.empty()) return {CatchUpClaim::Status::error, std::nullopt, std::move(error)};
  const auto answer = flagged(reply);
  if (!answer) {
    return {CatchUpClaim::Status::error, std::nullopt,
            fmt::format("{}: the catch-up script answered {}", impl_->client_->describe(), to_string(reply.type))};
  }
  if (answer->first == 0 && answer->second.empty()) return {CatchUpClaim::Status::superseded, std::nullopt, {}};
  auto [cursor, decode_error] = impl_->decode(job_key, answer->second);
  if (!cursor) return {CatchUpClaim::Status::error, std::nullopt, std::move(decode_error)};
  const auto status = answer->first == 1   ? CatchUpClaim::Status::claimed
                      : answer->first == 2 ? CatchUpClaim::Status::epoch_changed
                                           : CatchUpClaim::Status::superseded;
  return {status, cursor, {}};
}

std::chrono::nanoseconds FleetState::ledger_life_refresh(std::chrono::nanoseconds keep_for) {
  return std::min<std::chrono::nanoseconds>(keep_for / 4, std::chrono::hours{1});
}

std::vector<LedgerWriteResult> FleetState::record_fires(std::span<const LedgerWrite> writes) {
  check_ledger_writes(writes);
  if (writes.empty()) return {};
  // One script call for the batch. A job's keys live ledger_life_refresh
  // beyond keep_for and are given that life again once a refresh here,
  // not on every record (docs/redis.md, "Ledger").
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> keys, args;
  std::vector<bool> sets_life;
  keys.reserve(2 * writes.size());
  args.reserve(8 * writes.size());
  for (const auto& write : writes) {
    const FireRecord& record = write.record;
    const auto refresh = ledger_life_refresh(write.retention.keep_for);
    // Asked for each record of a due job: the first may be a replacement,
    // which sets nothing; the script sets it once per call.
    const bool due = impl_->life_due(record.job_key, now, refresh);
    sets_life.push_back(due);
    keys.push_back(impl_->ledger_index_key(record.job_key));
    keys.push_back(impl_->ledger_records_key(record.job_key));
    for (std::string arg : {record.fire_key, std::to_string(micros_of(record.scheduled_at)), format_fire_record(record),
                            std::to_string(ledger_rank(record)), std::to_string(write.retention.keep_count),
                            keep_us(write.retention.keep_for), keep_ms(write.retention.keep_for + refresh),
                            std::string(due ? "1" : "0")}) {
      args.push_back(std::move(arg));
    }
  }
  std::vector<LedgerWriteResult> results;
  results.reserve(writes.size());
  Reply reply;
  try {
    reply = impl_->client_->impl().eval(record_fires_script(), keys, args);
  } catch (const std::exception& e) {
    results.assign(writes.size(), LedgerWriteResult{LedgerWriteResult::Status::error, e.what()});
    return results;
  }
  if (reply.type != Reply::Type::array || reply.elements.size() != writes.size()) {
    const std::string error = fmt::format("{}: the ledger script answered {}", impl_->client_->describe(),
                                          reply.is_error() ? reply.text : std::string(to_string(reply.type)));
    results.assign(writes.size(), LedgerWriteResult{LedgerWriteResult::Status::error, error});
    return results;
  }
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const Reply& answer = reply.elements[i];
    results.push_back(impl_->recorded(writes[i].record, answer));
    // 2: a new fire's record, its keys' life set as asked.
    if (sets_life[i] && answer.type == Reply::Type::integer && answer.integer == 2) {
      impl_->life_was_set(writes[i].record.job_key, now);
    }
  }
  return results;
}

LedgerRead FleetState::read_fires(std::string_view job_key, std::size_t limit) {
  check_ledger_read(job_key, limit);
  const std::array<std::string, 2> keys{impl_->ledger_index_key(job_key), impl_->ledger_records_key(job_key)};
  const std::array<std::string, 1> args{std::to_string(limit)};
  Reply reply;
  try {
    reply = impl_->client_->impl().eval(read_fires_script(), keys, args);
  } catch (const std::exception& e) {
    return {LedgerRead::Status::error, {}, e.what()};
  }
  if (reply.type != Reply::Type::array) {
    return {LedgerRead::Status::error, {},
            fmt::format("{}: reading {} answered {}", impl_->client_->describe(), keys[1],
                        reply.is_error() ? reply.text : std::string(to_string(reply.type)))};
  }
  LedgerRead read{LedgerRead::Status::found, {}, {}};
  for (const Reply& element : reply.elements) {
    std::optional<FireRecord> record =
        element.type == Reply::Type::string ? parse_fire_record(element.text) : std::nullopt;
    if (!record) {
      return {LedgerRead::Status::error, {},
              fmt::format("{}: {} holds \"{}\", not a fire record", impl_->client_->describe(), keys[1],
                          element.text.substr(0, 64))};
    }
    read.records.push_back(std::move(*record));
  }
  return read;
}

std::string FleetState::ledger_key(std::string_view job_key) const { return impl_->ledger_index_key(job_key); }

std::string FleetState::document_key(DocumentId which) const {
  return impl_->options_.fleet_prefix + document_name(which);
}

std::optional<Instant> FleetState::store_now() {
  try {
    const Reply reply = impl_->client_->impl().command({"TIME"});
    if (reply.type != Reply::Type::array || reply.elements.size() != 2) return std::nullopt;
    const std::int64_t us = std::stoll(reply.elements[0].text) * 1'000'000 + std::stoll(reply.elements[1].text);
    return Instant{std::chrono::microseconds{us}};
  } catch (...) {
    return std::nullopt;  // unreachable, or not two numbers
  }
}

FleetState::StoredDocument FleetState::load_document(DocumentId which) {
  const std::string key = document_key(which);
  Reply reply;
  try {
    reply = impl_->client_->impl().command({"GET", key});
  } catch (const std::exception& e) {
    return {StoredDocument::Status::error, {}, 0, e.what()};
  }
  if (reply.is_nil()) return {StoredDocument::Status::absent, {}, 0, {}};
  if (reply.type != Reply::Type::string) {
    return {StoredDocument::Status::error, {}, 0,
            fmt::format("{}: GET {} answered {}", impl_->client_->describe(), key,
                        reply.is_error() ? reply.text : std::string(to_string(reply.type)))};
  }
  return {StoredDocument::Status::found, std::move(reply.text), 0, {}};
}

FleetState::DocumentReplace FleetState::replace_document(DocumentId which, const StoredDocument& seen,
                                                         const std::string& text, std::chrono::nanoseconds keep_for) {
  const std::array<std::string, 1> keys{document_key(which)};
  const bool present = seen.status == StoredDocument::Status::found;
  const auto keep_ms = keep_for <= std::chrono::nanoseconds::zero()
                           ? 0
                           : std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(keep_for).count());
  const std::array<std::string, 4> args{present ? "1" : "0", present ? seen.text : std::string(), text,
                                        std::to_string(keep_ms)};
  Reply reply;
  try {
    reply = impl_->client_->impl().eval(replace_document_script(), keys, args);
  } catch (const std::exception& e) {
    return {DocumentReplace::Status::error, e.what()};
  }
  if (reply.type != Reply::Type::integer) {
    return {DocumentReplace::Status::error,
            fmt::format("{}: the {} script answered {}", impl_->client_->describe(), document_name(which),
                        reply.is_error() ? reply.text : std::string(to_string(reply.type)))};
  }
  return {reply.integer == 1 ? DocumentReplace::Status::written : DocumentReplace::Status::conflict, {}};
}

}  // namespace fleetcron::redis
