// This replica in the fleet's replica registry (docs/fleet-state.md#replica-registry):
// announced every registry_heartbeat_interval by the upkeep thread; the
// answer says whether its coordinated fires may be claimed here.
#include "core/scheduler/registry_membership.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/support/assert.h"
#include "core/support/describe_exception.h"
#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::detail {

namespace {

// A record lives this many heartbeats: two may be lost before it goes.
constexpr int record_heartbeats = 3;
// How often an accepted replica mentions its jobs in the catalogue when
// they did not change: well within catalogue_keep_for.
constexpr std::chrono::hours catalogue_refresh{1};
// A failed catalogue write is tried again after 5 s, then twice as long
// each time, 10 min at most.
constexpr std::chrono::seconds catalogue_first_retry{5};
constexpr std::chrono::minutes catalogue_max_retry{10};

std::string describe(const std::vector<SettingDifference>& differences) {
  std::string out;
  for (const auto& d : differences) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{} is {} here, {} in the fleet", d.name, d.here.empty() ? "unset" : d.here,
                       d.fleet.empty() ? "unset" : d.fleet);
  }
  return out;
}

std::string refusal_of(const ReplicaAnnounce& answer) {
  const ReplicaAnnouncement& fleet = answer.reference->replica;
  return fmt::format("this replica's settings differ from the fleet's, those of replica {} on {} (started {}): {}; "
                     "it claims nothing until they match, or until no replica with those settings is left",
                     fleet.replica_id, fleet.host.empty() ? "an unnamed host" : fleet.host,
                     format_rfc3339(fleet.started), describe(answer.differences));
}

}  // namespace

RegistryMembership::RegistryMembership(Host& host, const FleetOptions& fleet, std::shared_ptr<Clock> clock)
    : host_(host),
      state_(fleet.state),
      announcement_([&] {
        ReplicaAnnouncement record = fleet.replica;
        record.replica_id = fleet.replica_id;
        return record;
      }()),
      heartbeat_(fleet.registry_heartbeat_interval),
      clock_(std::move(clock)) {}

void RegistryMembership::start() {
  std::lock_guard guard(mutex_);
  started_at_ = clock_->now();
  started_ = true;
  settings_refusal_ = "this replica has not announced itself in the fleet's replica registry yet";
}

std::chrono::nanoseconds RegistryMembership::replica_ttl() const {
  return record_heartbeats * heartbeat_;
}

std::optional<std::string> RegistryMembership::verdict() const {
  std::lock_guard guard(mutex_);
  if (!settings_refusal_.empty()) return settings_refusal_;
  if (verified_at_ && clock_->steady_now() - *verified_at_ < replica_ttl()) return std::string();
  return std::nullopt;
}

std::string RegistryMembership::settings_refusal() {
  if (auto standing = verdict()) return std::move(*standing);
  // Accepted longer ago than a record lives (the upkeep thread is late or
  // failing, or the clock jumped): asked again, here and now.
  announce();
  return verdict().value_or("this replica's settings are not verified against the fleet's: no announcement "
                            "was accepted while its last record lived");
}

// Touch with the store is lost by any failed announcement, or by a gap
// between answered ones longer than 1.5 heartbeats (a pause, a late
// thread): an outage long enough to expire a record (2 heartbeats less the
// retry, more where failures wait out timeouts) fails at least one of this
// replica's announcements, whatever their phase.
FleetState::ExpiredRecords RegistryMembership::expired_records_at(Clock::SteadyTime now) const {
  const auto gap = heartbeat_ * 3 / 2;
  const bool in_touch = answered_at_ && now - *answered_at_ <= gap && now - in_touch_since_ >= replica_ttl();
  return in_touch ? FleetState::ExpiredRecords::report : FleetState::ExpiredRecords::keep;
}

void RegistryMembership::note_answered(Clock::SteadyTime now, bool answered) {
  if (!answered) {
    answered_at_.reset();
    return;
  }
  if (!answered_at_ || now - *answered_at_ > heartbeat_ * 3 / 2) in_touch_since_ = now;
  answered_at_ = now;
}

ReplicaAnnounce RegistryMembership::ask(std::span<AloneRequest* const> group, std::size_t& listed,
                                        std::uint64_t& runs_mark, Instant my_start, FleetState::ExpiredRecords expired) {
  listed = 0;
  try {
    ReplicaAnnouncement me = announcement_;
    me.jobs_digest = fmt::format("{:016x}", host_.jobs_digest());
    me.started = my_start;
    runs_mark = host_.mark_runs_read();  // before the read: a record queued before it is of a run read
    me.runs = host_.running_fires();
    // The group's runs first, as many as the record's runs leave room for
    // (at least one: a record too large loses its last runs, not listed alone).
    const std::size_t room = max_listed_runs - std::min(max_listed_runs, me.runs.size());
    listed = std::min(group.size(), std::max<std::size_t>(room, 1));
    if (me.runs.size() > max_listed_runs - listed) me.runs.resize(max_listed_runs - listed);
    std::vector<std::string_view> alone_jobs;
    std::vector<RunningFire> alone;
    for (std::size_t i = 0; i < listed; ++i) {
      alone.push_back(group[i]->run->fire);
      alone_jobs.push_back(group[i]->run->fire.job_key);
    }
    me.runs.insert(me.runs.begin(), alone.begin(), alone.end());
    return state_->announce_replica(me, host_.fleet_now(), replica_ttl(), alone_jobs, expired);
  } catch (...) {
    return {ReplicaAnnounce::Status::error, {}, {}, {}, {}, {}, describe_exception(std::current_exception())};
  }
}

namespace {

/// What one run of a group announced alone learns of the answer: nothing
/// if its run did not fit in the record.
std::optional<ReplicaAnnounce> answer_for(const ReplicaAnnounce& answer, std::string_view job_key) {
  if (std::find(answer.unlisted_jobs.begin(), answer.unlisted_jobs.end(), job_key) != answer.unlisted_jobs.end()) {
    return std::nullopt;
  }
  ReplicaAnnounce own;
  own.status = answer.status;
  own.error = answer.error;
  if (answer.status == ReplicaAnnounce::Status::busy && answer.busy_jobs.empty()) {
    own.busy_on = answer.busy_on;
    own.busy_run = answer.busy_run;
    return own;
  }
  for (const auto& busy : answer.busy_jobs) {
    if (busy.job_key != job_key) continue;
    own.status = ReplicaAnnounce::Status::busy;
    own.busy_on = busy.busy_on;
    own.busy_run = busy.busy_run;
  }
  return own;
}

}  // namespace

ReplicaAnnounce RegistryMembership::announce() {
  std::unique_lock serial(announce_mutex_);  // answers are applied in the order they were asked
  std::vector<std::optional<ReplicaAnnounce>> none;
  return announce(serial, {}, none);
}

ReplicaAnnounce RegistryMembership::announce_alone(const AloneRun& alone) {
  AloneRequest request{&alone, std::nullopt};
  std::unique_lock lock(alone_mutex_);
  alone_waiting_.push_back(&request);
  for (;;) {
    // Answered by a group's leader, or the lead is free: this one takes it.
    alone_cv_.wait(lock, [&] { return request.answer || !alone_led_; });
    if (request.answer) return std::move(*request.answer);
    alone_led_ = true;
    lock.unlock();
    lead_alone(request);
    lock.lock();
  }
}

void RegistryMembership::lead_alone(AloneRequest& own) {
  std::unique_lock serial(announce_mutex_);
  std::vector<AloneRequest*> group{&own};
  {
    std::lock_guard guard(alone_mutex_);
    std::erase(alone_waiting_, &own);
    const std::size_t taken = std::min(alone_waiting_.size(), max_listed_runs - 1);
    group.insert(group.end(), alone_waiting_.begin(), alone_waiting_.begin() + static_cast<std::ptrdiff_t>(taken));
    alone_waiting_.erase(alone_waiting_.begin(), alone_waiting_.begin() + static_cast<std::ptrdiff_t>(taken));
  }
  std::vector<std::optional<ReplicaAnnounce>> answers(group.size());
  try {
    (void)announce(serial, group, answers);
  } catch (...) {
    for (auto& answer : answers) {
      if (!answer) answer = ReplicaAnnounce{ReplicaAnnounce::Status::error, {}, {}, {}, {}, {}, describe_exception(std::current_exception())};
    }
  }
  {
    std::lock_guard guard(alone_mutex_);
    std::vector<AloneRequest*> unlisted;  // in the next group, first
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (answers[i]) {
        group[i]->answer = std::move(answers[i]);
      } else {
        unlisted.push_back(group[i]);
      }
    }
    alone_waiting_.insert(alone_waiting_.begin(), unlisted.begin(), unlisted.end());
    alone_led_ = false;
  }
  alone_cv_.notify_all();  // each request is its waiter's from here
}

std::size_t RegistryMembership::alone_waiting() const {
  std::lock_guard guard(alone_mutex_);
  return alone_waiting_.size();
}

ReplicaAnnounce RegistryMembership::announce(std::unique_lock<std::mutex>& serial, std::span<AloneRequest* const> group,
                                             std::vector<std::optional<ReplicaAnnounce>>& answers) {
  // The record's life starts before the request: trusted no longer than it lives.
  const auto now = clock_->steady_now();
  // Before the runs are read: every run unlisted by now is left out.
  const std::uint64_t covers = announce_requested_.load();
  Instant my_start{};
  {
    std::lock_guard guard(mutex_);
    my_start = started_at_;
  }
  std::size_t listed = 0;
  std::uint64_t runs_mark = 0;
  ReplicaAnnounce answer = ask(group, listed, runs_mark, my_start, expired_records_at(now));
  note_answered(now, answer.status != ReplicaAnnounce::Status::error);
  for (std::size_t i = 0; i < listed; ++i) {
    answers[i] = answer_for(answer, group[i]->run->fire.job_key);
    if (!answers[i]) continue;
    // Written: the heartbeats list it from here (none came between, serial).
    const auto status = answers[i]->status;
    if (status != ReplicaAnnounce::Status::error && status != ReplicaAnnounce::Status::busy) group[i]->run->written();
  }
  if (answer.status == ReplicaAnnounce::Status::busy) return answer;  // nothing was written
  if (answer.status != ReplicaAnnounce::Status::error) {
    announce_covered_ = std::max(announce_covered_, covers);
    if (runs_mark != 0) host_.runs_listed(runs_mark);
  }
  FLEETCRON_ASSERT(announce_covered_ <= announce_requested_.load());  // no announcement covers a run not yet unlisted
  Notes notes;
  std::vector<ReplicaRecord> lost;
  if (answer.status != ReplicaAnnounce::Status::error) lost = sort_out_same_id(answer, my_start, notes);
  {
    std::lock_guard guard(mutex_);
    std::string refusal = take_answer(answer, now, notes);
    if (refusal != settings_refusal_) {
      notes.emplace_back(refusal.empty() ? LogLevel::info : LogLevel::error,
                         refusal.empty() ? std::string("replica registry: this replica's settings are the fleet's; "
                                                       "it claims its fires")
                                         : "replica registry: " + refusal);
      settings_refusal_ = std::move(refusal);
    }
  }
  serial.unlock();  // reporting may take store round trips, and re-runs ask for the verdict
  for (const auto& [level, note] : notes) host_.log(level, note);
  if (!lost.empty()) host_.report_lost(lost);
  return answer;
}

std::string RegistryMembership::take_answer(const ReplicaAnnounce& answer, Clock::SteadyTime now, Notes& notes) {
  std::string refusal;
  if (answer.status == ReplicaAnnounce::Status::error) {
    announce_failed_ = true;
    notes.emplace_back(LogLevel::warning, "replica registry: announcing this replica failed: " + answer.error);
    // Trusted as long as the last accepted record lives; then unverified.
    const bool fresh = verified_at_ && now - *verified_at_ < replica_ttl();
    refusal = fresh ? settings_refusal_
                    : fmt::format("this replica's settings are not verified against the fleet's (the replica "
                                  "registry failed: {}); it claims nothing until they are",
                                  answer.error);
  } else {
    if (announced_before_ && !answer.found_own) {
      notes.emplace_back(LogLevel::warning,
                         "replica registry: this replica's record was gone (the store lost its data, or this "
                         "replica was away longer than its record lives): its jobs are catalogued again now");
      ++recatalogue_requests_;
    } else if (announce_failed_) {
      // The failed one may have been written (its answer lost) into a
      // store that had lost its data: this one then finds its record.
      ++recatalogue_requests_;
    }
    announce_failed_ = false;
    announced_before_ = true;
    if (!answer.replaced.empty()) notes.emplace_back(LogLevel::error, "replica registry: replaced: " + answer.replaced);
    if (answer.status == ReplicaAnnounce::Status::accepted) verified_at_ = now;
    if (answer.status == ReplicaAnnounce::Status::refused) refusal = refusal_of(answer);
    if (!twin_refusal_.empty()) refusal = twin_refusal_;
    if (answer.other_jobs != reported_other_jobs_) {
      notes.emplace_back(answer.other_jobs.empty() ? LogLevel::info : LogLevel::warning,
                         answer.other_jobs.empty()
                             ? std::string("replica registry: every live replica runs this replica's jobs again")
                             : fmt::format("replica registry: {} run other jobs (keys or schedules) than this "
                                           "replica: reported, not refused (a rolling deploy?)",
                                           fmt::join(answer.other_jobs, ", ")));
      reported_other_jobs_ = answer.other_jobs;
    }
    if (answer.others_jobs_fingerprint != others_jobs_fingerprint_) {
      // Another replica's jobs changed: it may have marked removed a job
      // this one still runs, which mentioning ours again unmarks.
      if (others_jobs_fingerprint_ != 0) ++recatalogue_requests_;
      others_jobs_fingerprint_ = answer.others_jobs_fingerprint;
    }
  }
  return refusal;
}

std::vector<ReplicaRecord> RegistryMembership::sort_out_same_id(ReplicaAnnounce& answer, Instant my_start,
                                                                Notes& notes) {
  std::vector<ReplicaRecord> lost, same_id;
  for (auto& record : answer.expired) {
    (record.replica.replica_id == announcement_.replica_id ? same_id : lost).push_back(record);
  }
  const auto started_as = [](const ReplicaRecord& r) {
    return [&r](const ReplicaRecord& other) { return other.replica.started == r.replica.started; };
  };
  for (const auto& record : same_id) {
    const auto pending = std::find_if(same_id_pending_.begin(), same_id_pending_.end(), started_as(record));
    if (pending == same_id_pending_.end()) {
      same_id_pending_.push_back(record);
      continue;
    }
    // Replaced before and written again since: a live process, not a
    // predecessor. The younger of the two gives way.
    const bool rewritten = record.beat > pending->beat;
    *pending = record;
    if (rewritten && record.replica.started < my_start && twin_refusal_.empty()) {
      twin_refusal_ = fmt::format("another live process runs as replica \"{}\" (on {}, pid {}, started {}), "
                                  "before this one: this one claims nothing; give each replica its own --replica-id",
                                  announcement_.replica_id, record.replica.host, record.replica.pid,
                                  format_rfc3339(record.replica.started));
      notes.emplace_back(LogLevel::error, "replica registry: " + twin_refusal_);
    }
  }
  // Not written again while it would have lived: dead, its runs lost.
  const Instant now = host_.fleet_now();
  for (auto it = same_id_pending_.begin(); it != same_id_pending_.end();) {
    const bool seen_now = std::any_of(same_id.begin(), same_id.end(), started_as(*it));
    if (seen_now || now < it->expires_at) {
      ++it;
      continue;
    }
    lost.push_back(*it);
    it = same_id_pending_.erase(it);
  }
  answer.expired = lost;
  return lost;
}

void RegistryMembership::announce_unlisted() {
  const std::uint64_t ticket = announce_requested_.fetch_add(1) + 1;
  {
    // Waits for the announcement under way, if any: the runs that ended
    // while it was asked queue here, and the first of them announces for all.
    std::lock_guard serial(announce_mutex_);
    if (announce_covered_ >= ticket) return;
  }
  announce();
}

void RegistryMembership::catalogue_if_due() {
  const auto steady = clock_->steady_now();
  const Instant now = host_.fleet_now();
  // The digest first: jobs read after it are as new or newer, so a change
  // in between is written again next time, never left out.
  const std::uint64_t digest = host_.jobs_digest();
  const bool fresh = catalogued_digest_ == digest && catalogued_at_ && steady - *catalogued_at_ < catalogue_refresh;
  const std::uint64_t requests = recatalogue_requests_.load();
  if (fresh && requests == recatalogued_) return;
  if (catalogue_retry_at_ && steady < *catalogue_retry_at_) return;
  const std::vector<CataloguedJob> jobs = host_.catalogued_jobs(now);
  // Only what the fleet runs: a refused replica's jobs may be another deploy's.
  if (verdict() != std::string()) return;
  ControlChange answer;
  try {
    answer = state_->catalogue_jobs(jobs, now, announcement_.replica_id);
  } catch (...) {
    answer = {ControlChange::Status::error, {}, describe_exception(std::current_exception())};
  }
  if (answer.status == ControlChange::Status::error) {
    catalogue_backoff_ = catalogue_backoff_ == std::chrono::nanoseconds::zero()
                             ? std::chrono::nanoseconds{catalogue_first_retry}
                             : std::min<std::chrono::nanoseconds>(2 * catalogue_backoff_, catalogue_max_retry);
    catalogue_retry_at_ = steady + catalogue_backoff_;
    host_.log(LogLevel::warning, fmt::format("job catalogue: this replica's jobs were not all written (tried again in "
                                             "{}): {}",
                                             format_duration(catalogue_backoff_), answer.error));
    return;
  }
  catalogue_retry_at_.reset();
  catalogue_backoff_ = std::chrono::nanoseconds::zero();
  catalogued_digest_ = digest;
  catalogued_at_ = steady;
  recatalogued_ = requests;
}

void RegistryMembership::withdraw_once() {
  // Never started: never announced, nothing to remove.
  {
    std::lock_guard guard(mutex_);
    if (!started_) return;
  }
  if (withdrawn_.exchange(true)) return;
  ControlChange answer;
  // Tried twice: a record left behind lists the runs this replica had, and
  // they are reported lost when it expires.
  for (int attempt = 0; attempt < 2 && answer.status == ControlChange::Status::error; ++attempt) {
    try {
      answer = state_->withdraw_replica(announcement_.replica_id, host_.fleet_now());
    } catch (...) {
      answer = {ControlChange::Status::error, {}, describe_exception(std::current_exception())};
    }
  }
  if (answer.status == ControlChange::Status::error) {
    host_.log(LogLevel::warning, fmt::format("replica registry: this replica's record was not removed ({}); it expires in {}",
                                       answer.error, format_duration(replica_ttl())));
  }
}

}  // namespace fleetcron::detail
