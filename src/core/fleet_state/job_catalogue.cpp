// The job catalogue: the document's text, and its merge and read as
// compare-and-swaps of it (fleet_state.h, job_catalogue.h).
#include "fleetcron/job_catalogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "core/fleet_state/fleet_documents.h"
#include "core/support/fnv1a.h"
#include "core/fleet_state/record_text.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron {

namespace {

using detail::decode_text;
using detail::encode_text;
using detail::micros_text;

constexpr std::string_view catalogue_version = "1";
constexpr std::string_view every_replica_version = "2";  // one more field: "replica"
constexpr std::string_view removed_version = "3";        // the scope, then when it was removed

std::optional<CataloguedJob> parse_line(std::string_view line) {
  const std::vector<std::string_view> f = detail::split_fields(line);
  const bool fleet = f.size() == 7 && f[0] == catalogue_version;
  const bool every_replica = f.size() == 8 && f[0] == every_replica_version && f[7] == "replica";
  const bool removed = f.size() == 9 && f[0] == removed_version && (f[7] == "fleet" || f[7] == "replica");
  if ((!fleet && !every_replica && !removed) || (f[4] != "0" && f[4] != "1")) return std::nullopt;
  auto key = decode_text(f[1]);
  auto spec = decode_text(f[2]);
  auto zone = decode_text(f[3]);
  auto by = decode_text(f[6]);
  std::optional<Instant> seen;
  std::optional<Instant> removed_at;
  if (!key || key->empty() || !spec || !zone || !by || !detail::parse_instant(f[5], seen) || !seen) return std::nullopt;
  if (removed && (!detail::parse_instant(f[8], removed_at) || !removed_at)) return std::nullopt;
  return CataloguedJob{std::move(*key), std::move(*spec), std::move(*zone), f[4] == "1", *seen, std::move(*by),
                       every_replica || (removed && f[7] == "replica"), removed_at};
}

/// The catalogue read, without the entries stale at `now`, by key;
/// nullopt (with `error` set) if it is not a catalogue.
std::optional<std::map<std::string, CataloguedJob>> live_jobs(const FleetState::StoredDocument& document,
                                                              FleetState::DocumentId id, Instant now,
                                                              std::string& error) {
  if (document.status == FleetState::StoredDocument::Status::error) {
    error = document.error;
    return std::nullopt;
  }
  std::map<std::string, CataloguedJob> jobs;
  if (document.status == FleetState::StoredDocument::Status::absent) return jobs;
  auto parsed = parse_job_catalogue(document.text);
  if (!parsed) {
    error = fmt::format("the job catalogue's key {} holds \"{}\", not a catalogue", document_name(id),
                        document.text.substr(0, 64));
    return std::nullopt;
  }
  for (auto& job : *parsed) {
    if (job.seen + catalogue_keep_for > now) jobs.insert_or_assign(job.job_key, std::move(job));
  }
  return jobs;
}

// Marks the entries `replica_id` mentioned last as removed; those it lists
// again replace theirs right after, unmarked.
void mark_removed(std::map<std::string, CataloguedJob>& live, std::string_view replica_id, Instant now) {
  for (auto& [key, job] : live) {
    if (job.seen_by == replica_id && !job.removed) job.removed = now;
  }
}

}  // namespace

std::string format_job_catalogue(std::span<const CataloguedJob> jobs) {
  std::string out;
  for (const auto& job : jobs) {
    if (!out.empty()) out += '\n';
    const std::string_view version = job.removed ? removed_version : job.every_replica ? every_replica_version : catalogue_version;
    out += fmt::format("{} {} {} {} {} {} {}", version, encode_text(job.job_key), encode_text(job.spec),
                       encode_text(job.zone), job.seconds_field ? 1 : 0, micros_text(job.seen), encode_text(job.seen_by));
    if (job.removed) {
      out += fmt::format(" {} {}", job.every_replica ? "replica" : "fleet", micros_text(*job.removed));
    } else if (job.every_replica) {
      out += " replica";
    }
  }
  return out;
}

std::optional<std::vector<CataloguedJob>> parse_job_catalogue(std::string_view text) {
  return detail::parse_lines(text, parse_line);
}

std::uint32_t catalogue_part(std::string_view job_key) noexcept {
  return static_cast<std::uint32_t>(detail::fnv1a(job_key) % FleetDocuments::catalogue_parts);
}

namespace {

/// One replica's write of its jobs, as each part sees it.
struct CatalogueWrite {
  std::array<std::vector<const CataloguedJob*>, FleetState::catalogue_parts> by_part;
  std::set<std::string_view> outside_part_zero;  // keys whose line a release before 0.3 kept in part 0
  Instant now;
  std::string_view replica_id;
};

/// One part's lines after `write`: nullopt, with `error` set, if the part
/// cannot be read.
std::optional<std::map<std::string, CataloguedJob>> edited_part(const FleetState::StoredDocument& read,
                                                                FleetState::DocumentId id,
                                                                const CatalogueWrite& write, std::string& error) {
  auto live = live_jobs(read, id, write.now, error);
  // A part that is not a catalogue is rebuilt: every replica mentions its
  // jobs again within the hour.
  if (!live && read.status == FleetState::StoredDocument::Status::found) {
    live.emplace();
    error.clear();
  }
  if (!live) return std::nullopt;
  if (!write.replica_id.empty()) mark_removed(*live, write.replica_id, write.now);
  // Part 0 drops the lines of this write's jobs that live in their own
  // part now (an older release wrote them here), so it does not fill up.
  if (id.part == 0) std::erase_if(*live, [&](const auto& line) { return write.outside_part_zero.contains(line.first); });
  for (const CataloguedJob* job : write.by_part[id.part]) live->insert_or_assign(job->job_key, *job);
  return live;
}

std::size_t not_removed(const std::map<std::string, CataloguedJob>& live) {
  return static_cast<std::size_t>(std::count_if(live.begin(), live.end(), [](const auto& line) { return !line.second.removed; }));
}

std::string part_text(std::map<std::string, CataloguedJob>&& live) {
  std::vector<CataloguedJob> sorted;
  sorted.reserve(live.size());
  for (auto& [key, job] : live) sorted.push_back(std::move(job));
  return format_job_catalogue(sorted);
}

/// The part's compare-and-swap loop: its new text, unless unchanged or too large.
std::string write_part(FleetState& state, FleetState::DocumentId id, const CatalogueWrite& write) {
  using Stored = FleetState::StoredDocument;
  return detail::edit_document(state, id, [&](const Stored& read, std::string& failure) -> std::optional<detail::DocumentWrite> {
    auto live = edited_part(read, id, write, failure);
    if (!live) return std::nullopt;
    const bool absent = read.status != Stored::Status::found;
    if (absent && live->empty()) return std::nullopt;  // nothing to keep: no document
    detail::DocumentWrite text{part_text(std::move(*live)), catalogue_keep_for};
    if (!absent && text.text == read.text) return std::nullopt;  // unchanged: its expiry is others'
    if (text.text.size() > max_catalogue_bytes) {
      failure = fmt::format("the job catalogue's part {} would take {} bytes, more than the limit of {}",
                            document_name(id), text.text.size(), max_catalogue_bytes);
      return std::nullopt;
    }
    return text;
  });
}

}  // namespace

ControlChange FleetState::catalogue_jobs(std::span<const CataloguedJob> jobs, Instant now, std::string_view replica_id) {
  CatalogueWrite write{{}, {}, now, replica_id};
  for (const auto& job : jobs) {
    check_job_key(job.job_key);
    const std::uint32_t part = catalogue_part(job.job_key);
    write.by_part[part].push_back(&job);
    if (part != 0) write.outside_part_zero.insert(job.job_key);
  }
  // The whole catalogue's bound first (removed lines aside: they go within
  // 48 h), so that no part is written past it.
  std::size_t total = 0;
  for (std::uint32_t part = 0; part < catalogue_parts; ++part) {
    std::string error;
    const DocumentId id{Document::catalogue, part};
    const auto live = edited_part(load_document(id), id, write, error);
    if (!live) return {ControlChange::Status::error, {}, std::move(error)};
    total += not_removed(*live);
  }
  if (total > max_catalogued_jobs) {
    return {ControlChange::Status::error, {},
            fmt::format("the job catalogue would hold {} jobs, more than the limit of {}", total, max_catalogued_jobs)};
  }
  std::vector<std::string> failures;  // the other parts are still written
  for (std::uint32_t part = 0; part < catalogue_parts; ++part) {
    std::string error = write_part(*this, {Document::catalogue, part}, write);
    if (!error.empty()) failures.push_back(std::move(error));
  }
  if (failures.empty()) return {ControlChange::Status::changed, {}, {}};
  return {ControlChange::Status::error, {},
          failures.size() == 1 ? failures.front()
                               : fmt::format("{} (and {} more of its {} parts not written)", failures.front(),
                                             failures.size() - 1, catalogue_parts)};
}

CatalogueRead FleetState::read_catalogue(Instant now) {
  CatalogueRead read;
  std::map<std::string, CataloguedJob> merged;
  for (std::uint32_t part = 0; part < catalogue_parts; ++part) {
    const DocumentId id{Document::catalogue, part};
    const StoredDocument document = load_document(id);
    if (document.status == StoredDocument::Status::error) return {CatalogueRead::Status::error, {}, document.error};
    std::string error;
    auto live = live_jobs(document, id, now, error);
    if (!live) {  // not a catalogue: its jobs are left out, the others shown
      if (read.error.empty()) read.error = error + " (its jobs are left out until a replica writes it again)";
      continue;
    }
    // A key in two parts (a release before 0.3 wrote every line to part 0):
    // the newer mention is the one.
    for (auto& [key, job] : *live) {
      const auto [it, inserted] = merged.try_emplace(key, job);
      if (!inserted && job.seen > it->second.seen) it->second = std::move(job);
    }
  }
  read.jobs.reserve(merged.size());
  for (auto& [key, job] : merged) read.jobs.push_back(std::move(job));
  return read;
}

}  // namespace fleetcron
