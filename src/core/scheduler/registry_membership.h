// Internal: this replica's membership in the fleet's replica registry
// (docs/fleet-state.md#replica-registry) — its announcements, the verdict
// on its settings, its jobs in the catalogue, its withdrawal — a component
// of the scheduler with its own state and locks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleetcron/clock.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

/// Announces the replica (its settings, its jobs' digest, its runs in
/// progress) and keeps the registry's verdict: its coordinated fires are
/// refused while its settings differ from the fleet's, are not verified
/// yet, or another live process runs under its replica id. Hands the runs
/// of replicas whose records expired to the host, to be reported lost.
///
/// Locks: announce_mutex_ (held across an announcement's store call, so
/// answers apply in the order asked) is taken before the host's calls and
/// mutex_; mutex_ is a leaf.
class RegistryMembership {
 public:
  /// What the registry needs from the scheduler.
  class Host {
   public:
    /// The store's time.
    [[nodiscard]] virtual Instant fleet_now() = 0;
    /// The keyed entries' digest (keys and schedules), and their catalogue
    /// lines at `now` (the store's time).
    [[nodiscard]] virtual std::uint64_t jobs_digest() = 0;
    [[nodiscard]] virtual std::vector<CataloguedJob> catalogued_jobs(Instant now) = 0;
    /// The runs in progress here, at most max_listed_runs.
    [[nodiscard]] virtual std::vector<RunningFire> running_fires() = 0;
    /// Reports the runs of replicas whose records expired as lost.
    virtual void report_lost(const std::vector<ReplicaRecord>& expired) = 0;
    /// Marks a read of the runs in progress (the next mark, counted from
    /// 1): a `running` record queued before it is of a run that read lists.
    [[nodiscard]] virtual std::uint64_t mark_runs_read() = 0;
    /// An announcement whose read of the runs had mark `mark` was written:
    /// every run a record queued before that mark tells of is listed.
    virtual void runs_listed(std::uint64_t mark) = 0;
    virtual void log(LogLevel level, const std::string& message) = 0;

   protected:
    ~Host() = default;
  };

  /// A run written into this replica's record only if no other replica
  /// lists a run of its job (fleet-wide overlap); `written` is called,
  /// before another announcement can start, once it is.
  struct AloneRun {
    RunningFire fire;
    std::function<void()> written;
  };

  RegistryMembership(Host& host, const FleetOptions& fleet, std::shared_ptr<Clock> clock);

  /// How long a record lives: 3 heartbeats.
  [[nodiscard]] std::chrono::nanoseconds replica_ttl() const;
  /// Before the first announcement: this start's time, and unverified.
  void start();
  /// Writes this replica's record and takes the verdict.
  ReplicaAnnounce announce();
  /// The same with `alone` first in its runs, unless another replica lists
  /// a run of its job: then its answer is `busy`, and the verdict stays as
  /// it was. Runs that start together share one announcement (a group
  /// commit): a caller whose run the announcement under way did not take
  /// announces every run waiting by then, at most max_listed_runs.
  ReplicaAnnounce announce_alone(const AloneRun& alone);
  /// How many runs wait to be announced alone (none taken by an announcement yet).
  [[nodiscard]] std::size_t alone_waiting() const;
  /// After a run was unlisted: makes sure an announcement that no longer
  /// lists it reached the store. Runs that end together share one (a group
  /// commit): an announcement begun after this run was unlisted covers it.
  void announce_unlisted();
  /// Why coordinated fires are refused here, "" when they are not; asks
  /// the registry again, here and now, when the last acceptance is older
  /// than a record lives.
  [[nodiscard]] std::string settings_refusal();
  /// The refusal, "" when accepted, nullopt when accepted longer ago than a record lives.
  [[nodiscard]] std::optional<std::string> verdict() const;
  /// Writes this replica's jobs into the fleet's catalogue when they
  /// changed since it last did, an hour passed, or the store lost them.
  void catalogue_if_due();
  /// Removes this replica's record, once (if start() ran).
  void withdraw_once();

 private:
  using Notes = std::vector<std::pair<LogLevel, std::string>>;
  /// A run waiting to be announced alone, and its answer once it was
  /// (set under alone_mutex_; the leader never touches it after).
  struct AloneRequest {
    const AloneRun* run;
    std::optional<ReplicaAnnounce> answer;
  };
  /// One announcement (`serial` holds announce_mutex_; released before
  /// the reports), for the runs of `group` too: `answers` gets one per
  /// request, empty for a run it could not list (the record's 64 runs or
  /// its bytes were full: that run's caller leads the next group).
  ReplicaAnnounce announce(std::unique_lock<std::mutex>& serial, std::span<AloneRequest* const> group,
                           std::vector<std::optional<ReplicaAnnounce>>& answers);
  /// Leads one group, its own request first; publishes the answers.
  void lead_alone(AloneRequest& own);
  /// Writes the record: this start's, with the host's digest and runs, and
  /// the first `listed` (set here: those that fit) of the group's runs first.
  [[nodiscard]] ReplicaAnnounce ask(std::span<AloneRequest* const> group, std::size_t& listed, std::uint64_t& runs_mark,
                                    Instant my_start,
                                    FleetState::ExpiredRecords expired);
  /// Whether an announcement asked at `now` may judge the records that
  /// expired, and the bookkeeping of one answered or failed.
  [[nodiscard]] FleetState::ExpiredRecords expired_records_at(Clock::SteadyTime now) const;
  void note_answered(Clock::SteadyTime now, bool answered);
  /// The bookkeeping of an answer (mutex_ held): what to log, and the refusal that stands now.
  std::string take_answer(const ReplicaAnnounce& answer, Clock::SteadyTime now, Notes& notes);
  /// Sorts the records of this replica's id out of `answer.expired` (see
  /// same_id_pending_); returns the records to report lost now.
  std::vector<ReplicaRecord> sort_out_same_id(ReplicaAnnounce& answer, Instant my_start, Notes& notes);

  Host& host_;
  const std::shared_ptr<FleetState> state_;
  const ReplicaAnnouncement announcement_;  // the options' record, with the replica id
  const std::chrono::nanoseconds heartbeat_;
  const std::shared_ptr<Clock> clock_;

  mutable std::mutex alone_mutex_;  // guards the three below and the requests' answers; taken after announce_mutex_, if both
  std::condition_variable alone_cv_;  // an answer, or the lead, became free
  std::vector<AloneRequest*> alone_waiting_;  // not yet taken by an announcement
  bool alone_led_ = false;  // a caller leads a group now
  std::mutex announce_mutex_;  // held across an announcement; guards the members down to mutex_
  /// Unlisted runs waiting for an announcement (tickets, announce_unlisted());
  /// announce_covered_ is the last ticket a written one covered.
  std::atomic<std::uint64_t> announce_requested_{0};
  std::uint64_t announce_covered_ = 0;
  /// When the last announcement was answered (none since one failed), and
  /// since when they have been answered with no failure and no gap longer
  /// than 1.5 heartbeats: until in touch for a record's life the replica
  /// keeps the records that expired meanwhile (they may have been cut off
  /// with it) rather than report their runs lost.
  std::optional<Clock::SteadyTime> answered_at_;
  Clock::SteadyTime in_touch_since_{};
  /// Records of this replica's id with another start that announcements
  /// replaced: a dead predecessor's, whose runs are reported lost once the
  /// record would have expired, unless it is written again before — then
  /// a live twin runs under this id (twin_refusal_).
  std::vector<ReplicaRecord> same_id_pending_;
  /// Set when this replica is the younger of two live processes with one
  /// replica id: it claims nothing from then on.
  std::string twin_refusal_;

  mutable std::mutex mutex_;  // guards the members down to the catalogue's
  Instant started_at_{};
  bool started_ = false;          // start() ran: withdraw_once() has a record to remove
  std::string settings_refusal_;  // empty: accepted
  std::optional<Clock::SteadyTime> verified_at_;  // the last accepted announcement
  std::vector<std::string> reported_other_jobs_;
  std::uint64_t others_jobs_fingerprint_ = 0;  // the last answer's (0: none yet)
  bool announced_before_ = false;
  bool announce_failed_ = false;  // since the last answered one

  std::atomic<bool> withdrawn_{false};
  /// Counted when this replica's record was gone (the store lost its
  /// data): catalogue_if_due() writes the catalogue at once, until a write
  /// covers the last count (recatalogued_).
  std::atomic<std::uint64_t> recatalogue_requests_{0};
  // The catalogue's, its caller's alone (start(), then the upkeep thread).
  std::uint64_t recatalogued_ = 0;
  std::optional<std::uint64_t> catalogued_digest_;
  std::optional<Clock::SteadyTime> catalogued_at_;
  // After a failed write: none before catalogue_retry_at_, each failure
  // doubling the wait (a write refused at the limit costs 64 part reads).
  std::optional<Clock::SteadyTime> catalogue_retry_at_;
  std::chrono::nanoseconds catalogue_backoff_{0};
};

}  // namespace fleetcron::detail
