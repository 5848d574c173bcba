// The replica registry: the document's text, and announce, read and
// withdraw as compare-and-swaps of it (fleet_state.h, replica_registry.h).
#include "fleetcron/replica_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <utility>

#include "core/fleet_state/fleet_documents.h"
#include "core/support/fnv1a.h"
#include "core/fleet_state/record_text.h"
#include "fleetcron/duration.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron {

namespace {

using detail::decode_text;
using detail::encode_text;
using detail::micros_text;

constexpr std::string_view registry_version = "1";
constexpr std::size_t fixed_fields = 11;
constexpr std::chrono::hours expired_record_grace{1};

bool has_space(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

void check_bounded(std::string_view field, std::string_view value, std::size_t most) {
  if (value.size() > most) {
    throw std::invalid_argument(fmt::format("replica registry: {} is {} bytes, more than {}", field, value.size(), most));
  }
}

bool older(const ReplicaRecord& a, const ReplicaRecord& b) {
  if (a.replica.started != b.replica.started) return a.replica.started < b.replica.started;
  return a.replica.replica_id < b.replica.replica_id;
}

std::optional<Instant> instant_field(std::string_view text) {
  std::optional<Instant> at;
  if (!detail::parse_instant(text, at) || !at) return std::nullopt;
  return at;
}

std::optional<ReplicaRecord> parse_line(std::string_view line) {
  const std::vector<std::string_view> f = detail::split_fields(line);
  std::size_t settings = 0, runs = 0;
  if (f.size() < fixed_fields + 1 || f[0] != registry_version || !detail::parse_number(f[10], settings) ||
      settings > max_replica_settings || f.size() < fixed_fields + 2 * settings + 1 ||
      !detail::parse_number(f[fixed_fields + 2 * settings], runs) || runs > max_listed_runs ||
      f.size() != fixed_fields + 2 * settings + 1 + 7 * runs || (f[8] != "0" && f[8] != "1")) {
    return std::nullopt;
  }
  ReplicaRecord record;
  auto id = decode_text(f[1]);
  auto host = decode_text(f[2]);
  auto version = decode_text(f[4]);
  auto jobs = decode_text(f[9]);
  const auto started = instant_field(f[5]);
  const auto beat = instant_field(f[6]);
  const auto expires = instant_field(f[7]);
  if (!id || id->empty() || !host || !version || !jobs || !started || !beat || !expires ||
      !detail::parse_number(f[3], record.replica.pid)) {
    return std::nullopt;
  }
  record.replica.replica_id = std::move(*id);
  record.replica.host = std::move(*host);
  record.replica.version = std::move(*version);
  record.replica.jobs_digest = std::move(*jobs);
  record.replica.started = *started;
  record.beat = *beat;
  record.expires_at = *expires;
  record.accepted = f[8] == "1";
  for (std::size_t i = 0; i < settings; ++i) {
    auto name = decode_text(f[fixed_fields + 2 * i]);
    auto value = decode_text(f[fixed_fields + 2 * i + 1]);
    if (!name || name->empty() || !value) return std::nullopt;
    record.replica.settings.push_back(ReplicaSetting{std::move(*name), std::move(*value)});
  }
  for (std::size_t i = 0, at = fixed_fields + 2 * settings + 1; i < runs; ++i, at += 7) {
    RunningFire run;
    auto job = decode_text(f[at]);
    auto key = decode_text(f[at + 1]);
    const auto scheduled = instant_field(f[at + 2]);
    const auto started_at = instant_field(f[at + 4]);
    if (!job || !key || key->empty() || !scheduled || !started_at || !detail::parse_number(f[at + 3], run.fence) ||
        !detail::parse_number(f[at + 5], run.recovery) || run.recovery < 0 || (f[at + 6] != "0" && f[at + 6] != "1")) {
      return std::nullopt;
    }
    run.job_key = std::move(*job);
    run.fire_key = std::move(*key);
    run.scheduled_at = *scheduled;
    run.started_at = *started_at;
    run.manual = f[at + 6] == "1";
    record.replica.runs.push_back(std::move(run));
  }
  return record;
}

/// The records of the document read: those live at `now` (oldest first)
/// and those expired; nullopt (with `error` set) if it is not a registry.
struct Records {
  std::vector<ReplicaRecord> live;
  std::vector<ReplicaRecord> expired;
};
std::optional<Records> read_records(const FleetState::StoredDocument& document, Instant now, std::string& error) {
  if (document.status == FleetState::StoredDocument::Status::error) {
    error = document.error;
    return std::nullopt;
  }
  if (document.status == FleetState::StoredDocument::Status::absent) return Records{};
  auto records = parse_replica_registry(document.text);
  if (!records) {
    error = fmt::format("the replica registry holds \"{}\", not a registry", document.text.substr(0, 64));
    return std::nullopt;
  }
  Records split;
  for (auto& record : *records) (record.expires_at > now ? split.live : split.expired).push_back(std::move(record));
  std::sort(split.live.begin(), split.live.end(), older);
  return split;
}

/// Takes this replica's earlier record out of `records`; answers whether
/// it was accepted. A record of an earlier process with the same id (its
/// start differs) is a dead one: it joins the expired, to be reported.
/// This process's own record, expired (a stall, a clock step), is not.
/// What take_own() found of the replica's earlier record.
struct OwnRecord {
  bool accepted = false;  ///< live, and accepted
  bool found = false;     ///< live or expired
};

OwnRecord take_own(Records& records, const ReplicaAnnouncement& replica) {
  const auto mine = [&](const ReplicaRecord& r) { return r.replica.replica_id == replica.replica_id; };
  const auto same_start = [&](const ReplicaRecord& r) { return mine(r) && r.replica.started == replica.started; };
  OwnRecord own;
  std::vector<ReplicaRecord> previous;
  for (auto it = records.live.begin(); it != records.live.end();) {
    if (!mine(*it)) {
      ++it;
      continue;
    }
    if (it->replica.started == replica.started) {
      own.accepted = own.accepted || it->accepted;
      own.found = true;
    } else {
      previous.push_back(std::move(*it));
    }
    it = records.live.erase(it);
  }
  own.found = own.found || std::any_of(records.expired.begin(), records.expired.end(), same_start);
  std::erase_if(records.expired, same_start);
  records.expired.insert(records.expired.end(), std::make_move_iterator(previous.begin()),
                         std::make_move_iterator(previous.end()));
  return own;
}

/// Drops the newest of the replica's listed runs until its record takes at
/// most max_replica_record_bytes.
void fit_record(ReplicaRecord& record) {
  while (!record.replica.runs.empty() &&
         format_replica_registry(std::span<const ReplicaRecord>(&record, 1)).size() > max_replica_record_bytes) {
    record.replica.runs.pop_back();
  }
}

/// The document holding `records`, living an hour past the last of them
/// (so a replica starting meanwhile still finds, and reports, the last ones).
std::optional<detail::DocumentWrite> registry_write(std::vector<ReplicaRecord>& records, Instant now,
                                                    std::string& error) {
  if (records.size() > max_registered_replicas) {
    error = fmt::format("the replica registry would hold {} replicas, more than the limit of {}", records.size(),
                        max_registered_replicas);
    return std::nullopt;
  }
  std::sort(records.begin(), records.end(), older);
  detail::DocumentWrite write{format_replica_registry(records), std::chrono::milliseconds{1}};
  if (write.text.size() > max_registry_bytes) {
    error = fmt::format("the replica registry would take {} bytes, more than the limit of {}", write.text.size(),
                        max_registry_bytes);
    return std::nullopt;
  }
  for (const auto& record : records) write.keep_for = std::max(write.keep_for, record.expires_at - now);
  write.keep_for += expired_record_grace;
  return write;
}

/// Whether `replica`, which was `accepted` before, is accepted among the
/// live `others`: the fleet's settings are those of the oldest accepted
/// replica, this one included if it was accepted and is older. A record
/// that beat more than a third of `ttl` (a heartbeat) after `now` comes
/// from a clock ahead of this one's and does not count: such a replica
/// sees the others' records expire early and drops them, and must not
/// take the fleet's settings with it.
ReplicaAnnounce verdict(const ReplicaAnnouncement& replica, bool accepted, const std::vector<ReplicaRecord>& others,
                        Instant now, std::chrono::nanoseconds ttl) {
  ReplicaAnnounce answer;
  answer.status = ReplicaAnnounce::Status::accepted;
  ReplicaRecord self{replica, {}, {}, accepted};
  for (const auto& other : others) {
    if (other.replica.jobs_digest != replica.jobs_digest) {
      answer.other_jobs.push_back(fmt::format("{} on {}", other.replica.replica_id, other.replica.host));
    }
    answer.others_jobs_fingerprint = detail::fnv1a(other.replica.jobs_digest,
                                                   detail::fnv1a(other.replica.replica_id, answer.others_jobs_fingerprint));
  }
  const auto reference = std::find_if(others.begin(), others.end(), [&](const ReplicaRecord& r) {
    return r.accepted && r.beat <= now + ttl / 3;
  });
  if (reference == others.end() || (accepted && older(self, *reference))) return answer;
  answer.differences = compare_settings(replica.settings, reference->replica.settings);
  if (!answer.differences.empty()) answer.status = ReplicaAnnounce::Status::refused;
  answer.reference = *reference;
  return answer;
}

/// The `busy` answer when another of the live records lists a run of
/// `job` (none when `job` is empty).
std::optional<ReplicaAnnounce> running_elsewhere(const std::vector<ReplicaRecord>& live, std::string_view job) {
  if (job.empty()) return std::nullopt;
  for (const auto& record : live) {
    for (const auto& run : record.replica.runs) {
      if (run.job_key != job) continue;
      ReplicaAnnounce busy;
      busy.status = ReplicaAnnounce::Status::busy;
      busy.busy_on = record.replica.replica_id;
      busy.busy_run = run;
      return busy;
    }
  }
  return std::nullopt;
}

// Of `jobs`, those a live record lists a run of — and, when the expired
// records are kept, an expired record of another replica.
std::vector<ReplicaAnnounce::BusyJob> busy_alone(const Records& records, std::string_view replica_id,
                                                 std::span<const std::string_view> jobs, bool keep) {
  std::vector<ReplicaRecord> others;
  if (keep) {  // but for an earlier process of this replica: dead, reported by the caller
    for (const auto& r : records.expired) {
      if (r.replica.replica_id != replica_id) others.push_back(r);
    }
  }
  std::vector<ReplicaAnnounce::BusyJob> busy;
  for (const std::string_view job : jobs) {
    auto found = running_elsewhere(records.live, job);
    if (!found) found = running_elsewhere(others, job);
    if (found) busy.push_back({std::string(job), std::move(found->busy_on), std::move(*found->busy_run)});
  }
  return busy;
}

}  // namespace

void check_replica_announcement(const ReplicaAnnouncement& replica) {
  if (replica.replica_id.empty() || replica.replica_id.size() > 64 || has_space(replica.replica_id)) {
    throw std::invalid_argument(fmt::format("replica registry: replica id \"{}\" must be 1 to 64 characters without "
                                            "whitespace", replica.replica_id.substr(0, 80)));
  }
  check_bounded("host", replica.host, 255);
  check_bounded("version", replica.version, 64);
  check_bounded("jobs_digest", replica.jobs_digest, 64);
  if (replica.settings.size() > max_replica_settings) {
    throw std::invalid_argument(fmt::format("replica registry: {} settings, more than {}", replica.settings.size(),
                                            max_replica_settings));
  }
  if (replica.runs.size() > max_listed_runs) {
    throw std::invalid_argument(fmt::format("replica registry: {} runs listed, more than {}", replica.runs.size(),
                                            max_listed_runs));
  }
  for (const auto& run : replica.runs) {
    check_bounded("a run's job key", run.job_key, 1024);
    check_bounded("a run's fire key", run.fire_key, 2048);
    if (run.fire_key.empty()) throw std::invalid_argument("replica registry: a run without a fire key");
  }
  for (std::size_t i = 0; i < replica.settings.size(); ++i) {
    const ReplicaSetting& setting = replica.settings[i];
    if (setting.name.empty() || setting.name.size() > 64 || has_space(setting.name)) {
      throw std::invalid_argument(fmt::format("replica registry: setting {} is named \"{}\": a name must be 1 to 64 "
                                              "characters without whitespace", i + 1, setting.name.substr(0, 80)));
    }
    check_bounded(fmt::format("setting {}'s value", setting.name), setting.value, 256);
    for (std::size_t j = 0; j < i; ++j) {
      if (replica.settings[j].name == setting.name) {
        throw std::invalid_argument(fmt::format("replica registry: setting {} is given twice", setting.name));
      }
    }
  }
}

std::string settings_fingerprint(std::span<const ReplicaSetting> settings) {
  std::map<std::string_view, std::string_view> sorted;
  for (const auto& setting : settings) sorted.emplace(setting.name, setting.value);
  std::uint64_t hash = detail::fnv1a_offset_basis;
  for (const auto& [name, value] : sorted) {
    hash = detail::fnv1a("\n", detail::fnv1a(value, detail::fnv1a("=", detail::fnv1a(name, hash))));
  }
  return fmt::format("{:016x}", hash);
}

std::vector<SettingDifference> compare_settings(std::span<const ReplicaSetting> here,
                                                std::span<const ReplicaSetting> fleet) {
  std::map<std::string, SettingDifference> by_name;
  for (const auto& setting : here) by_name[setting.name] = {setting.name, setting.value, {}};
  for (const auto& setting : fleet) {
    auto& difference = by_name[setting.name];
    difference.name = setting.name;
    difference.fleet = setting.value;
  }
  std::vector<SettingDifference> differences;
  for (auto& [name, difference] : by_name) {
    if (difference.here != difference.fleet) differences.push_back(std::move(difference));
  }
  return differences;
}

std::string format_replica_registry(std::span<const ReplicaRecord> replicas) {
  std::string out;
  for (const auto& record : replicas) {
    const ReplicaAnnouncement& r = record.replica;
    if (!out.empty()) out += '\n';
    out += fmt::format("{} {} {} {} {} {} {} {} {} {} {}", registry_version, encode_text(r.replica_id),
                       encode_text(r.host), r.pid, encode_text(r.version), micros_text(r.started),
                       micros_text(record.beat), micros_text(record.expires_at), record.accepted ? 1 : 0,
                       encode_text(r.jobs_digest), r.settings.size());
    for (const auto& setting : r.settings) out += fmt::format(" {} {}", encode_text(setting.name), encode_text(setting.value));
    out += fmt::format(" {}", r.runs.size());
    for (const auto& run : r.runs) {
      out += fmt::format(" {} {} {} {} {} {} {}", encode_text(run.job_key), encode_text(run.fire_key),
                         micros_text(run.scheduled_at), run.fence, micros_text(run.started_at), run.recovery,
                         run.manual ? 1 : 0);
    }
  }
  return out;
}

std::optional<std::vector<ReplicaRecord>> parse_replica_registry(std::string_view text) {
  return detail::parse_lines(text, parse_line);
}

ReplicaAnnounce FleetState::announce_replica(const ReplicaAnnouncement& announced, Instant now,
                                             std::chrono::nanoseconds ttl, std::string_view alone_job,
                                             ExpiredRecords expired) {
  const std::span<const std::string_view> alone(&alone_job, alone_job.empty() ? 0 : 1);
  return announce_replica(announced, now, ttl, alone, expired);
}

ReplicaAnnounce FleetState::announce_replica(const ReplicaAnnouncement& announced, Instant now,
                                             std::chrono::nanoseconds ttl,
                                             std::span<const std::string_view> alone_jobs, ExpiredRecords expired) {
  check_replica_announcement(announced);
  // As the store keeps it (microseconds): its own earlier record is recognised by its start.
  ReplicaAnnouncement replica = announced;
  replica.started = cursor_instant(replica.started);
  for (auto& run : replica.runs) {
    run.scheduled_at = cursor_instant(run.scheduled_at);
    run.started_at = cursor_instant(run.started_at);
  }
  if (ttl < min_replica_ttl || ttl > max_replica_ttl) {
    throw std::invalid_argument(fmt::format("replica registry: a record's ttl of {} is outside [{}, {}]",
                                            format_duration(ttl), format_duration(min_replica_ttl),
                                            format_duration(max_replica_ttl)));
  }
  ReplicaAnnounce answer;
  std::string error = detail::edit_document(
      *this, Document::registry,
      [&](const StoredDocument& read, std::string& failure) -> std::optional<detail::DocumentWrite> {
        auto records = read_records(read, now, failure);
        std::string replaced;
        if (!records && read.status == StoredDocument::Status::found) {
          // Heartbeats only, rewritten within one: a registry that is not
          // one is replaced, rather than every replica refusing for good.
          replaced = std::exchange(failure, {});
          records.emplace();
        }
        if (!records) return std::nullopt;
        const OwnRecord own_before = take_own(*records, replica);
        const bool keep = expired == ExpiredRecords::keep;
        ReplicaAnnouncement written_replica = replica;
        std::vector<ReplicaAnnounce::BusyJob> busy = busy_alone(*records, replica.replica_id, alone_jobs, keep);
        if (!busy.empty() && busy.size() == alone_jobs.size()) {
          answer = ReplicaAnnounce{};
          answer.status = ReplicaAnnounce::Status::busy;
          answer.busy_on = busy.front().busy_on;
          answer.busy_run = busy.front().busy_run;
          if (alone_jobs.size() > 1) answer.busy_jobs = std::move(busy);
          return std::nullopt;
        }
        for (const auto& b : busy) {  // the run asked alone (its job's first listed), not others of the job
          const auto run = std::find_if(written_replica.runs.begin(), written_replica.runs.end(),
                                        [&](const RunningFire& r) { return r.job_key == b.job_key; });
          if (run != written_replica.runs.end()) written_replica.runs.erase(run);
        }
        answer = verdict(written_replica, own_before.accepted, records->live, now, ttl);
        answer.found_own = own_before.found;
        answer.replaced = std::move(replaced);
        answer.busy_jobs = std::move(busy);
        ReplicaRecord own{std::move(written_replica), cursor_instant(now), cursor_instant(now + ttl),
                          answer.status == ReplicaAnnounce::Status::accepted};
        fit_record(own);
        for (const std::string_view job : alone_jobs) {
          const bool is_busy = std::any_of(answer.busy_jobs.begin(), answer.busy_jobs.end(),
                                           [&](const auto& b) { return b.job_key == job; });
          const bool listed = std::any_of(own.replica.runs.begin(), own.replica.runs.end(),
                                          [&](const RunningFire& r) { return r.job_key == job; });
          if (!is_busy && !listed) answer.unlisted_jobs.emplace_back(job);
        }
        std::vector<ReplicaRecord> written = std::move(records->live);
        for (ReplicaRecord& gone : records->expired) {
          // Kept for a caller in touch with the store to judge; an earlier
          // process of this replica is dead whatever the store did.
          const bool judge = !keep || gone.replica.replica_id == replica.replica_id;
          (judge ? answer.expired : written).push_back(std::move(gone));  // dropped: reported by this caller alone
        }
        written.push_back(std::move(own));
        return registry_write(written, now, failure);
      });
  if (!error.empty()) return ReplicaAnnounce{ReplicaAnnounce::Status::error, {}, {}, {}, {}, {}, std::move(error)};
  return answer;
}

RegistryRead FleetState::read_replicas(Instant now) {
  std::string error;
  auto records = read_records(load_document(Document::registry), now, error);
  if (!records) return {RegistryRead::Status::error, {}, std::move(error)};
  return {RegistryRead::Status::found, std::move(records->live), {}};
}

ControlChange FleetState::withdraw_replica(std::string_view replica_id, Instant now) {
  ControlChange answer{ControlChange::Status::unchanged, {}, {}};
  std::string error = detail::edit_document(
      *this, Document::registry,
      [&](const StoredDocument& read, std::string& failure) -> std::optional<detail::DocumentWrite> {
        auto records = read_records(read, now, failure);
        if (!records) return std::nullopt;
        const auto removed =
            std::erase_if(records->live, [&](const ReplicaRecord& r) { return r.replica.replica_id == replica_id; });
        if (removed == 0) return std::nullopt;
        answer.status = ControlChange::Status::changed;
        // The expired records stay, for the next announcement to report.
        records->live.insert(records->live.end(), std::make_move_iterator(records->expired.begin()),
                             std::make_move_iterator(records->expired.end()));
        return registry_write(records->live, now, failure);
      });
  if (!error.empty()) return {ControlChange::Status::error, {}, std::move(error)};
  return answer;
}

}  // namespace fleetcron
