// Fleet-wide controls: the document's text, and the operations on it as
// compare-and-swaps of the whole document (fleet_state.h, job_controls.h).
#include "fleetcron/job_controls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>

#include "core/fleet_state/fleet_documents.h"
#include "core/support/fnv1a.h"
#include "core/fleet_state/record_text.h"
#include "fleetcron/duration.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/backend/record_formats.h"
#include "fleetcron/backend/fleet_state_rules.h"

namespace fleetcron {

namespace {

using detail::decode_text;
using detail::encode_text;
using detail::micros_text;

constexpr std::string_view controls_version = "1";
constexpr std::size_t trigger_id_digits = 16;

bool parse_instant_field(std::string_view text, Instant& out, bool optional) {
  std::optional<Instant> at;
  if (!detail::parse_instant(text, at) || (!at && !optional)) return false;
  out = at.value_or(Instant{});
  return true;
}

std::optional<JobControl> parse_line(std::string_view line) {
  const std::vector<std::string_view> f = detail::split_fields(line);
  std::size_t triggers = 0;
  if (f.size() < 6 || f[0] != controls_version || !detail::parse_number(f[5], triggers) ||
      triggers > max_job_triggers || f.size() != 6 + 4 * triggers || (f[2] != "0" && f[2] != "1")) {
    return std::nullopt;
  }
  JobControl job;
  auto key = decode_text(f[1]);
  auto by = decode_text(f[4]);
  if (!key || key->empty() || !by || !parse_instant_field(f[3], job.changed_at, true)) return std::nullopt;
  job.job_key = std::move(*key);
  job.paused = f[2] == "1";
  job.changed_by = std::move(*by);
  for (std::size_t i = 0; i < triggers; ++i) {
    const std::size_t at = 6 + 4 * i;
    TriggerRequest trigger;
    auto requester = decode_text(f[at + 3]);
    if (f[at].size() != trigger_id_digits || !requester || !parse_instant_field(f[at + 1], trigger.requested_at, false) ||
        !parse_instant_field(f[at + 2], trigger.expires_at, false)) {
      return std::nullopt;
    }
    trigger.id = std::string(f[at]);
    trigger.requested_by = std::move(*requester);
    job.triggers.push_back(std::move(trigger));
  }
  return job;
}

std::string new_trigger_id() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("{:016x}", random());
}

TriggerRequest tombstone_of(TriggerRequest trigger, std::string_view taker) {
  trigger.expires_at = trigger.requested_at - std::chrono::microseconds{1};
  trigger.requested_by = taker.empty() ? std::string("unnamed") : std::string(taker);
  return trigger;
}

/// Whether `job` is the record of a resume, kept for resume_record_keep.
bool is_resume_record(const JobControl& job) { return !job.paused && job.triggers.empty() && job.changed_at != Instant{}; }

/// What prune() does with the triggers that expired untaken: drops them
/// (a read, or drop_expired_triggers(), whose caller alone reports them),
/// or keeps them (every other change: one that dropped them would lose
/// their report).
enum class ExpiredTriggers { drop, keep };

/// Drops or keeps expired triggers (adding the dropped to `expired`, if
/// given), drops tombstones older than trigger_tombstone_keep, then the
/// jobs left with neither a pause nor a trigger, but for resume records
/// younger than resume_record_keep.
void prune(std::vector<JobControl>& jobs, Instant now, ExpiredTriggers what, std::vector<JobTrigger>* expired = nullptr) {
  for (auto& job : jobs) {
    std::erase_if(job.triggers, [&](const TriggerRequest& trigger) {
      if (is_taken_trigger(trigger)) return trigger.requested_at + trigger_tombstone_keep <= now;
      if (trigger.expires_at > now || what == ExpiredTriggers::keep) return false;
      if (expired != nullptr) expired->push_back(JobTrigger{job.job_key, trigger});
      return true;
    });
  }
  std::erase_if(jobs, [&](const JobControl& job) {
    return !job.paused && job.triggers.empty() && !(is_resume_record(job) && job.changed_at + resume_record_keep > now);
  });
}

/// Drops the oldest resume records while the controls take more than
/// max_controlled_jobs lines or max_controls_bytes.
void make_room(std::vector<JobControl>& jobs) {
  std::vector<std::size_t> resumes;  // oldest first
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (is_resume_record(jobs[i])) resumes.push_back(i);
  }
  if (resumes.empty()) return;  // nothing to drop: the bounds are checked by the caller
  std::stable_sort(resumes.begin(), resumes.end(),
                   [&](std::size_t a, std::size_t b) { return jobs[a].changed_at < jobs[b].changed_at; });
  std::size_t lines = jobs.size();
  std::size_t bytes = format_job_controls(jobs).size();
  std::vector<bool> dropped(jobs.size(), false);
  for (const std::size_t i : resumes) {
    if (lines <= max_controlled_jobs && bytes <= max_controls_bytes) break;
    dropped[i] = true;
    --lines;
    bytes -= std::min(bytes, format_job_controls(std::span<const JobControl>(&jobs[i], 1)).size() + 1);
  }
  std::vector<JobControl> kept;
  kept.reserve(lines);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!dropped[i]) kept.push_back(std::move(jobs[i]));
  }
  jobs = std::move(kept);
}

JobControl& job_of(std::vector<JobControl>& jobs, std::string_view job_key) {
  auto it = std::lower_bound(jobs.begin(), jobs.end(), job_key,
                             [](const JobControl& job, std::string_view key) { return job.job_key < key; });
  if (it == jobs.end() || it->job_key != job_key) it = jobs.insert(it, JobControl{.job_key = std::string(job_key)});
  return *it;
}

ControlChange failed(std::string error) { return {ControlChange::Status::error, {}, std::move(error)}; }

/// The jobs of the document read, pruned at `now`; nullopt (with `error`
/// set) if it is not a controls document.
std::optional<std::vector<JobControl>> jobs_of(const FleetState::StoredDocument& document, Instant now,
                                               std::string& error, ExpiredTriggers what,
                                               std::vector<JobTrigger>* expired = nullptr) {
  if (document.status == FleetState::StoredDocument::Status::error) {
    error = document.error;
    return std::nullopt;
  }
  if (document.status == FleetState::StoredDocument::Status::absent) return std::vector<JobControl>{};
  auto jobs = parse_job_controls(document.text);
  if (!jobs) {
    error = fmt::format("the controls hold \"{}\", not a controls document", document.text.substr(0, 64));
    return std::nullopt;
  }
  std::sort(jobs->begin(), jobs->end(), [](const JobControl& a, const JobControl& b) { return a.job_key < b.job_key; });
  prune(*jobs, now, what, expired);
  return jobs;
}

/// Applies `edit` to the controls in a compare-and-swap loop; writes only
/// what `edit` answered `changed`. With `expired`, it drops the triggers
/// expired in the document of the last round and lists them there (those
/// its write dropped); without, it keeps them.
ControlChange edit_controls(FleetState& state, Instant now,
                            const std::function<ControlChange(std::vector<JobControl>&)>& edit,
                            std::vector<JobTrigger>* expired = nullptr) {
  ControlChange answer;
  std::string error = detail::edit_document(
      state, FleetState::Document::controls,
      [&](const FleetState::StoredDocument& read, std::string& failure) -> std::optional<detail::DocumentWrite> {
        if (expired != nullptr) expired->clear();
        const auto what = expired != nullptr ? ExpiredTriggers::drop : ExpiredTriggers::keep;
        auto jobs = jobs_of(read, now, failure, what, expired);
        if (!jobs) return std::nullopt;
        answer = edit(*jobs);
        if (answer.status != ControlChange::Status::changed) return std::nullopt;
        prune(*jobs, now, what);
        make_room(*jobs);
        if (jobs->size() > max_controlled_jobs) {
          failure = fmt::format("{} jobs would be paused or have triggers waiting, more than the limit of {}",
                                jobs->size(), max_controlled_jobs);
          return std::nullopt;
        }
        detail::DocumentWrite write{format_job_controls(*jobs), std::chrono::nanoseconds{0}};
        if (write.text.size() > max_controls_bytes) {
          failure = fmt::format("the controls would take {} bytes, more than the limit of {}", write.text.size(),
                                max_controls_bytes);
          return std::nullopt;
        }
        return write;
      });
  if (!error.empty()) return failed(std::move(error));
  return answer;
}

}  // namespace

void check_control_author(std::string_view by) {
  const bool spaced = std::any_of(by.begin(), by.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (by.empty() || by.size() > 64 || spaced) {
    throw std::invalid_argument(fmt::format("fleet state: \"{}\" cannot name who changes a control: it must be 1 to 64 "
                                            "characters without whitespace", by.substr(0, 80)));
  }
}

bool is_taken_trigger(const TriggerRequest& trigger) noexcept { return trigger.expires_at < trigger.requested_at; }

void check_trigger_request_id(std::string_view request_id) {
  const bool printable = std::all_of(request_id.begin(), request_id.end(), [](char c) {
    return static_cast<unsigned char>(c) > ' ' && static_cast<unsigned char>(c) < 0x7f;
  });
  if (request_id.empty() || request_id.size() > 128 || !printable) {
    throw std::invalid_argument(fmt::format("fleet state: request id \"{}\" must be 1 to 128 printable characters "
                                            "without whitespace", request_id.substr(0, 80)));
  }
}

std::string trigger_id_of(std::string_view job_key, std::string_view request_id) {
  const std::uint64_t hash = detail::fnv1a(request_id, detail::fnv1a(std::string_view("\0", 1), detail::fnv1a(job_key)));
  return fmt::format("{:016x}", hash);
}

std::string format_job_controls(std::span<const JobControl> jobs) {
  std::string out;
  for (const auto& job : jobs) {
    if (!out.empty()) out += '\n';
    out += fmt::format("{} {} {} {} {} {}", controls_version, encode_text(job.job_key), job.paused ? 1 : 0,
                       job.changed_at == Instant{} ? std::string("-") : micros_text(job.changed_at),
                       encode_text(job.changed_by), job.triggers.size());
    for (const auto& trigger : job.triggers) {
      out += fmt::format(" {} {} {} {}", trigger.id, micros_text(trigger.requested_at), micros_text(trigger.expires_at),
                         encode_text(trigger.requested_by));
    }
  }
  return out;
}

std::optional<std::vector<JobControl>> parse_job_controls(std::string_view text) {
  return detail::parse_lines(text, parse_line);
}

ControlsRead FleetState::read_controls(Instant now) {
  std::string error;
  ControlsRead read;
  auto jobs = jobs_of(load_document(Document::controls), now, error, ExpiredTriggers::drop, &read.expired);
  if (!jobs) return {ControlsRead::Status::error, {}, std::move(error)};
  for (JobControl& job : *jobs) {  // waiting triggers in `jobs`, tombstones apart
    std::erase_if(job.triggers, [&](const TriggerRequest& trigger) {
      if (!is_taken_trigger(trigger)) return false;
      read.taken.push_back(JobTrigger{job.job_key, trigger});
      return true;
    });
  }
  for (auto it = jobs->begin(); it != jobs->end();) {  // neither paused nor triggered: resumed, or nothing
    if (it->paused || !it->triggers.empty()) {
      ++it;
      continue;
    }
    if (is_resume_record(*it) && it->changed_at + resume_record_keep > now) read.resumed.push_back(std::move(*it));
    it = jobs->erase(it);
  }
  read.jobs = std::move(*jobs);
  return read;
}

ControlsRead FleetState::drop_expired_triggers(Instant now) {
  std::vector<JobTrigger> expired;
  const ControlChange change = edit_controls(
      *this, now,
      [&](std::vector<JobControl>&) {
        return ControlChange{expired.empty() ? ControlChange::Status::unchanged : ControlChange::Status::changed, {},
                             {}};
      },
      &expired);
  if (change.status == ControlChange::Status::error) return {ControlsRead::Status::error, {}, change.error};
  if (change.status != ControlChange::Status::changed) expired.clear();  // nothing written: nothing dropped here
  return {ControlsRead::Status::found, {}, {}, std::move(expired)};
}

ControlChange FleetState::set_paused(std::string_view job_key, bool paused, std::string_view by, Instant now) {
  check_job_key(job_key);
  check_control_author(by);
  return edit_controls(*this, now, [&](std::vector<JobControl>& jobs) {
    const bool known = std::any_of(jobs.begin(), jobs.end(), [&](const JobControl& j) { return j.job_key == job_key; });
    if (!known && !paused) return ControlChange{ControlChange::Status::unchanged, {}, {}};
    JobControl& job = job_of(jobs, job_key);
    if (job.paused == paused) return ControlChange{ControlChange::Status::unchanged, {}, {}};
    job.paused = paused;
    // Later than the change it replaces, whatever the writer's clock: a
    // replica tells a store that went back by a line older than it applied.
    job.changed_at = std::max(cursor_instant(now), job.changed_at + std::chrono::microseconds{1});
    job.changed_by = std::string(by);
    return ControlChange{ControlChange::Status::changed, {}, {}};
  });
}

ControlChange FleetState::request_trigger(std::string_view job_key, std::string_view by, Instant now,
                                          std::chrono::nanoseconds wait, std::string_view request_id) {
  check_job_key(job_key);
  check_control_author(by);
  if (wait <= std::chrono::nanoseconds::zero() || wait > max_trigger_wait) {
    throw std::invalid_argument(fmt::format("fleet state: a trigger's wait of {} is outside (0, {}]",
                                            format_duration(wait), format_duration(max_trigger_wait)));
  }
  if (!request_id.empty()) check_trigger_request_id(request_id);
  const std::string id = request_id.empty() ? new_trigger_id() : trigger_id_of(job_key, request_id);
  return edit_controls(*this, now, [&](std::vector<JobControl>& jobs) {
    const auto same = [&](const JobControl& j) {
      return j.job_key == job_key &&
             std::any_of(j.triggers.begin(), j.triggers.end(), [&](const TriggerRequest& t) { return t.id == id; });
    };
    if (std::any_of(jobs.begin(), jobs.end(), same)) return ControlChange{ControlChange::Status::unchanged, id, {}};
    JobControl& job = job_of(jobs, job_key);
    const auto waiting = std::count_if(job.triggers.begin(), job.triggers.end(),
                                       [](const TriggerRequest& t) { return !is_taken_trigger(t); });
    if (static_cast<std::size_t>(waiting) >= max_job_triggers) {
      return failed(fmt::format("job \"{}\" already has {} triggers waiting or expired but not yet reported by a "
                                "running replica, the limit",
                                job_key, max_job_triggers));
    }
    if (job.triggers.size() >= max_job_triggers) {  // the oldest tombstone makes room
      job.triggers.erase(std::find_if(job.triggers.begin(), job.triggers.end(), is_taken_trigger));
    }
    job.triggers.push_back(TriggerRequest{id, cursor_instant(now), cursor_instant(now + wait), std::string(by)});
    return ControlChange{ControlChange::Status::changed, id, {}};
  });
}

ControlChange FleetState::take_trigger(std::string_view job_key, std::string_view trigger_id, Instant now,
                                       std::string_view by) {
  check_job_key(job_key);
  if (!by.empty()) check_control_author(by);
  return edit_controls(*this, now, [&](std::vector<JobControl>& jobs) {
    for (auto& job : jobs) {
      if (job.job_key != job_key) continue;
      for (auto& trigger : job.triggers) {
        // An expired one is left for drop_expired_triggers() to report.
        if (trigger.id != trigger_id || is_taken_trigger(trigger) || trigger.expires_at <= now) continue;
        trigger = tombstone_of(std::move(trigger), by);
        return ControlChange{ControlChange::Status::changed, std::string(trigger_id), {}};
      }
    }
    return ControlChange{ControlChange::Status::absent, std::string(trigger_id), {}};
  });
}

}  // namespace fleetcron
