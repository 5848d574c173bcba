// Internal: the fleet-wide controls as one replica applies them
// (docs/fleet-state.md#controls), a component of the scheduler with its
// own state and lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/scheduler/entry.h"
#include "fleetcron/clock.h"
#include "fleetcron/events.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/scheduler.h"

namespace fleetcron::detail {

/// Who a pause written for EntryOptions::pause_on_failure is by:
/// "on-failure@" and the replica's id, cut to the controls' 64 characters.
[[nodiscard]] std::string pause_on_failure_author(std::string_view replica_id);

/// Reads the fleet's controls (poll()) and applies what changed: pauses and
/// resumes of this replica's keyed entries, and the triggers of its entries
/// it takes from the store, each then queued here once as a manual fire.
/// It remembers what it applied, so a store that went back (a restart from
/// an older snapshot, a lagging failover) is told apart from an operator's
/// change: a lost pause is warned about, a trigger that came back is not
/// run again.
///
/// Locks: poll_mutex_, held across a poll, is taken before anything the
/// host's calls take (the entry table's lock, the run queue's, the event
/// bus's); stop() takes it to wait for a poll under way.
class FleetControls {
 public:
  /// The entries, as seen with the scheduler's entry table locked.
  class EntryTable {
   public:
    /// The entry of a job key; null if none.
    [[nodiscard]] virtual std::shared_ptr<Entry> find(const std::string& job_key) const = 0;
    /// Pauses or resumes the entry fleet-wide; a pause also marks it caught
    /// up (a resume starts from now, on a replica restarted meanwhile too).
    virtual void set_paused(const std::shared_ptr<Entry>& entry, bool paused, std::vector<Event>& events) = 0;

   protected:
    ~EntryTable() = default;
  };

  /// What the controls need from the scheduler they apply to.
  class Host {
   public:
    /// The store's time.
    [[nodiscard]] virtual Instant fleet_now() = 0;
    /// Calls `apply` with the entry table locked, then wakes the loop.
    virtual void with_entries(const std::function<void(EntryTable&)>& apply) = 0;
    /// Queues a manual fire of `entry`; empty if queued, otherwise why not.
    [[nodiscard]] virtual std::string queue_manual(const std::shared_ptr<Entry>& entry, Instant scheduled_at) = 0;
    /// Why this replica's coordinated fires are refused ("" when they are not).
    [[nodiscard]] virtual std::string settings_refusal() = 0;
    virtual void publish(Event event) = 0;
    virtual void log(LogLevel level, const std::string& message) = 0;

   protected:
    ~Host() = default;
  };

  FleetControls(Host& host, std::shared_ptr<FleetState> state, std::string replica_id, std::shared_ptr<Clock> clock);

  /// Reads the controls and applies them; one poll at a time, and never an
  /// exception out of it (a fleet state may throw: logged). Writes the
  /// pauses requested since the last poll first.
  void poll();
  /// No trigger is taken from here on; returns once a poll under way ended,
  /// after one last try at the pauses requested and not written.
  void stop();
  /// Pauses the job fleet-wide (EntryOptions::pause_on_failure; `entry`,
  /// its entry here, is paused already): at the next poll, and again at
  /// each poll while the store fails, as long as that entry is still here
  /// and paused; true if so queued. Once stop() began, written here and
  /// now (no poll comes), and false. Never waits for a poll.
  bool request_pause(const std::string& job_key, EntryId entry, std::string by);

 private:
  struct TakenTrigger {
    std::shared_ptr<Entry> entry;
    TriggerRequest trigger;
  };
  /// What applying a controls read produced, reported after the entry lock.
  struct Applied {
    std::vector<Event> events;
    std::vector<std::string> notes;     // info
    std::vector<std::string> warnings;  // a pause or resume the store lost
  };
  /// One job's pause, as this replica last applied it.
  struct KnownPause {
    EntryId entry = 0;
    bool paused = false;
    Instant changed_at{};  // of the newest pause or resume applied here
    std::string changed_by;
  };

  void poll_once();
  /// A pause requested for the fleet (request_pause()).
  struct RequestedPause {
    std::string job_key;
    EntryId entry = 0;
    std::string by;
  };
  /// Writes the requested pauses (poll_mutex_ held); those the store
  /// failed stay requested. `last_try`: no more requests are queued, and
  /// the failures are logged as left.
  void write_requested_pauses(bool last_try);
  /// Writes `pauses` whose entries are still here and paused; answers
  /// those the store failed, and the first error.
  std::pair<std::vector<RequestedPause>, std::string> write_pauses(std::vector<RequestedPause> pauses);
  /// Under the entry lock: one job's pause as the fleet's document says it;
  /// and the jobs it no longer lists. A change older than one applied here,
  /// or a pause gone without its resume record, is a store that went back.
  void apply_pause(const JobControl& control, const std::shared_ptr<Entry>& entry, EntryTable& table, Applied& applied);
  void forget_unlisted(const std::unordered_set<std::string>& listed, EntryTable& table, Applied& applied);
  /// Notes the triggers gone since the last poll; answers the ids listed
  /// in `read` (made at `read_at`, the store's time) that came back: seen
  /// gone before, or requested well before an earlier read that did not
  /// list them.
  std::unordered_set<std::string> returned_triggers(const ControlsRead& read, Instant read_at);
  void take_triggers(const std::vector<TakenTrigger>& triggers, const std::unordered_set<std::string>& returned);
  /// After a take answered an error: whether the controls name this
  /// replica as its taker (nullopt: they could not be read either).
  [[nodiscard]] std::optional<bool> taken_here(const TakenTrigger& taken);
  [[nodiscard]] bool taken_here_in(const ControlsRead& read, const TakenTrigger& taken) const;
  /// Queues a trigger this replica took as a manual fire, and says so.
  void run_taken(const TakenTrigger& taken);
  /// Drops the triggers that expired untaken (`seen` in the poll's read, at
  /// `read_at`); reports those this replica's write dropped. If the drop
  /// answered an error, `seen` is kept, and those of them the next read
  /// lists no more are reported then (the write may have been this replica's).
  void report_expired_triggers(const std::vector<JobTrigger>& seen, Instant read_at);
  void report_unanswered_expiries(const ControlsRead& read);
  /// A log line and a TriggerExpiredEvent each (its ledger record is the event's).
  void report_expired(const std::vector<JobTrigger>& expired, std::string_view note);

  Host& host_;
  const std::shared_ptr<FleetState> state_;
  const std::string replica_id_;
  const std::shared_ptr<Clock> clock_;

  std::atomic<bool> stopping_{false};  // stop() began: no trigger is taken
  std::mutex poll_mutex_;  // held across a poll; guards every member below
  bool failing_ = false;  // the last read failed
  // Job key -> the entry and its pause as last applied here.
  std::unordered_map<std::string, KnownPause> known_pauses_;
  // Trigger ids listed at the last poll, and those seen gone since (taken
  // or expired), oldest first, for max_trigger_wait and at most
  // max_remembered_triggers: one listed again came back with a store that
  // went back and is dropped, not run again.
  std::unordered_set<std::string> triggers_listed_;
  std::unordered_set<std::string> triggers_gone_;
  std::deque<std::pair<Clock::SteadyTime, std::string>> triggers_gone_order_;
  std::optional<Instant> read_at_;  // the store's time of the last read
  std::vector<JobTrigger> expiries_unanswered_;  // a drop answered an error: reported if gone
  std::vector<TakenTrigger> takes_unanswered_;   // a take's answer lost, the controls unreadable
  bool pause_write_failing_ = false;             // the last write of a requested pause failed

  std::mutex requested_mutex_;  // guards the two below; taken alone or after poll_mutex_
  std::vector<RequestedPause> requested_pauses_;
  bool requests_closed_ = false;  // stop() took the last ones: request_pause() writes its own
};

}  // namespace fleetcron::detail
