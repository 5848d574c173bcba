#include "fleetcron/nats/election.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "fleetcron/duration.h"
#include "nats/keys.h"
#include "nats/status.h"

namespace fleetcron::nats {

namespace {

// How long a waiting candidate blocks in one watcher call, at most: the
// watcher's own timeout, so the wait also notices the campaign deadline.
constexpr auto watch_slice = std::chrono::milliseconds{250};
constexpr auto min_unvalidated_ttl = std::chrono::milliseconds{10};
// After the expected expiry of the leader's key, before campaigning: the
// server's clock and ours tick at slightly different moments.
constexpr auto expiry_slack = std::chrono::milliseconds{20};

}  // namespace

std::string_view to_string(State state) noexcept {
  switch (state) {
    case State::unknown: return "unknown";
    case State::candidate: return "candidate";
    case State::leader: return "leader";
  }
  return "";
}

class FLEETCRON_LOCAL Election::Impl {
 public:
  /// The callbacks a step owes, run after it without the lock.
  struct Callbacks {
    bool won = false;
    bool lost = false;
  };

  Impl(std::string name, std::string key, std::shared_ptr<Bucket> bucket, ElectionOptions options);
  void start(std::stop_token stop_token);
  void stop();
  void set_healthy(std::function<bool()> healthy);
  bool is_leader() const;
  State state() const;
  std::uint64_t fencing_token() const;
  std::string last_error() const;
  std::pair<bool, std::uint64_t> leadership() const;
  std::uint64_t last_lost_term() const;

  std::chrono::nanoseconds ttl_{0}, interval_{0}, valid_for_{0};

 private:
  void campaign(Callbacks& after);
  void campaign_as_candidate(Callbacks& after, Clock::SteadyTime sent);
  void maintain(Callbacks& after, Clock::SteadyTime sent);
  void take_over(std::uint64_t revision, std::uint64_t term, bool announce_now, Clock::SteadyTime sent);
  /// The server time (µs) of the write at `revision`; the local clock if it
  /// cannot be read. Called without the mutex (a request).
  std::uint64_t term_of(std::uint64_t revision);
  void recreate_bucket(const BackendError& missing);
  void reset_for_start();
  /// Waits the start-up splay, or until stopped.
  void wait_splay();
  /// How long to wait before the next campaign, and whether we lead.
  std::pair<std::chrono::nanoseconds, bool> next_wait();
  void wait_watching(std::chrono::nanoseconds wait, bool leader);
  /// The watcher of the key, created if there is none (nullptr: polling).
  std::shared_ptr<Watcher> watch_key();
  /// One change seen while waiting; true when the wait should end now.
  bool wait_ends_on(const Entry& change, bool leader, std::uint64_t ours, Clock::SteadyTime& until);
  void drop_watcher();
  void deliver_pending_loss();
  void resign(Callbacks& after);
  void deadline_main(std::stop_token stop);
  /// Leader to candidate; sets after.lost if leadership was announced.
  void lose_locked(Callbacks& after);
  void run(const Callbacks& after);
  void log(const std::string& message) const noexcept;

  std::string name_, key_;
  std::shared_ptr<Bucket> bucket_;
  ElectionOptions options_;
  std::shared_ptr<Clock> clock_;

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool started_ = false;
  bool stopping_ = false;
  bool finished_ = true;  // start() is past its loop: the deadline thread leaves
  State state_ = State::unknown;
  std::uint64_t last_revision_ = 0;  // 0: none (never a valid "last" for a CAS: 0 means "absent")
  bool notify_next_ = false;         // won, not yet announced
  bool announced_ = false;
  std::uint64_t won_revision_ = 0;
  std::uint64_t won_term_ = 0;  // term_of(the winning revision)
  std::uint64_t losses_ = 0;  // counts lose_locked(): a renewal that raced a loss is a new win
  Clock::SteadyTime valid_until_{};
  int tries_ = 0;
  std::string last_error_;
  std::function<bool()> healthy_;  // set_healthy()
  std::shared_ptr<Watcher> watcher_;  // while a candidate; shared so stop() can stop it outside the lock
  bool pending_lost_ = false;        // demoted by the deadline thread: on_lost still to run
  std::uint64_t lost_term_ = 0;
  std::optional<Clock::SteadyTime> leader_write_seen_;  // campaign thread only
  bool deletion_seen_ = false;                          // campaign thread only: the watcher saw a resignation
  mutable std::recursive_mutex callback_mutex_;  // one callback at a time
};

Election::Election(std::string name, std::string key, std::shared_ptr<Bucket> bucket, ElectionOptions options)
    : impl_(std::make_unique<Impl>(std::move(name), std::move(key), std::move(bucket), std::move(options))) {}
Election::~Election() { impl_->stop(); }
void Election::start(std::stop_token stop_token) { impl_->start(std::move(stop_token)); }
void Election::stop() { impl_->stop(); }
void Election::set_healthy(std::function<bool()> healthy) { impl_->set_healthy(std::move(healthy)); }
bool Election::is_leader() const { return impl_->is_leader(); }
State Election::state() const { return impl_->state(); }
std::uint64_t Election::fencing_token() const { return impl_->fencing_token(); }
std::chrono::nanoseconds Election::campaign_interval() const noexcept { return impl_->interval_; }
std::chrono::nanoseconds Election::bucket_ttl() const noexcept { return impl_->ttl_; }
std::string Election::last_error() const { return impl_->last_error(); }
std::pair<bool, std::uint64_t> Election::leadership() const { return impl_->leadership(); }
std::uint64_t Election::last_lost_term() const { return impl_->last_lost_term(); }

Election::Impl::Impl(std::string name, std::string key, std::shared_ptr<Bucket> bucket, ElectionOptions options)
    : name_(std::move(name)), key_(std::move(key)), bucket_(std::move(bucket)), options_(std::move(options)) {
  if (!bucket_) throw std::invalid_argument("nats::Election: bucket is null");
  if (name_.empty() || name_.find('\0') != std::string::npos) {
    throw std::invalid_argument("nats::Election: the name must be non-empty, without NUL bytes");
  }
  if (!detail::valid_key(key_)) {
    throw std::invalid_argument(fmt::format("nats::Election: key \"{}\" is not a valid NATS key "
                                            "(letters, digits, _ - / = . \\; no leading, trailing or double '.')",
                                            key_));
  }
  if (options_.startup_splay < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format("nats::ElectionOptions.startup_splay: {} is negative",
                                            format_duration(options_.startup_splay)));
  }
  clock_ = options_.clock ? options_.clock : system_clock();
  ttl_ = bucket_->ttl();
  if (options_.validate_ttl) {
    check_election_ttl(ttl_);
  } else if (ttl_ < min_unvalidated_ttl) {
    throw std::invalid_argument(fmt::format("bucket TTL should be 10 milliseconds or more (it is {})",
                                            format_duration(ttl_)));
  }
  interval_ = ttl_ * 3 / 4;
  const auto margin = options_.renew_margin.value_or(ttl_ / 5);
  if (margin < std::chrono::nanoseconds::zero() || margin >= ttl_) {
    throw std::invalid_argument(fmt::format("nats::ElectionOptions.renew_margin: {} is outside 0 .. bucket TTL {}",
                                            format_duration(margin), format_duration(ttl_)));
  }
  valid_for_ = ttl_ - margin;
  log(fmt::format("Campaign interval: {}", format_duration(interval_)));
}

void Election::Impl::log(const std::string& message) const noexcept {
  if (!options_.debug) return;
  try {
    options_.debug(message);
  } catch (...) {
    // a failing debug sink must not stop the election
  }
}

void Election::Impl::stop() {
  std::shared_ptr<Watcher> watcher;
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
    watcher = watcher_;
  }
  wake_.notify_all();
  // Wakes a candidate blocked on the watch; outside the lock, because it
  // is a JetStream request (it may take request_timeout in an outage).
  if (watcher) watcher->stop();
}

bool Election::Impl::is_leader() const {
  std::lock_guard guard(mutex_);
  return state_ == State::leader && announced_ && clock_->steady_now() < valid_until_;
}

State Election::Impl::state() const {
  std::lock_guard guard(mutex_);
  if (state_ == State::leader && clock_->steady_now() >= valid_until_) return State::candidate;  // demotion under way
  return state_;
}

std::uint64_t Election::Impl::fencing_token() const {
  std::lock_guard guard(mutex_);
  return state_ == State::leader ? won_term_ : 0;
}

std::pair<bool, std::uint64_t> Election::Impl::leadership() const {
  std::lock_guard guard(mutex_);
  const bool leader = state_ == State::leader && announced_ && clock_->steady_now() < valid_until_;
  return {leader, leader ? won_term_ : 0};
}

std::uint64_t Election::Impl::last_lost_term() const {
  std::lock_guard guard(mutex_);
  return lost_term_;
}

std::string Election::Impl::last_error() const {
  std::lock_guard guard(mutex_);
  return last_error_;
}

void Election::Impl::run(const Callbacks& after) {
  if (!after.won && !after.lost) return;
  std::lock_guard one_at_a_time(callback_mutex_);
  try {
    if (after.lost && options_.on_lost) options_.on_lost();
    if (after.won && options_.on_won) options_.on_won();
  } catch (const std::exception& e) {
    log(std::string("a callback threw: ") + e.what());
  } catch (...) {
    log("a callback threw");
  }
}

void Election::Impl::reset_for_start() {
  std::lock_guard guard(mutex_);
  if (started_) throw std::logic_error("election already running");
  started_ = true;
  stopping_ = false;
  finished_ = false;
  state_ = State::candidate;
  last_revision_ = 0;
  notify_next_ = announced_ = pending_lost_ = false;
  won_revision_ = 0;
  won_term_ = 0;
  tries_ = 0;
}

void Election::Impl::wait_splay() {
  if (options_.startup_splay <= std::chrono::nanoseconds::zero()) return;
  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<std::int64_t> pick(0, options_.startup_splay.count() - 1);
  const auto splay = std::chrono::nanoseconds{pick(random)};
  log(fmt::format("Start-up splay: {}", format_duration(splay)));
  std::unique_lock lock(mutex_);
  const auto until = clock_->steady_now() + splay;
  while (!stopping_ && clock_->steady_now() < until) clock_->wait_until(wake_, lock, until);
}

std::pair<std::chrono::nanoseconds, bool> Election::Impl::next_wait() {
  std::lock_guard guard(mutex_);
  const bool leader = state_ == State::leader;
  std::chrono::nanoseconds wait = interval_;
  if (options_.backoff) {
    // Zero or negative would spin: at least 1% of the interval.
    wait = std::max(options_.backoff->duration(leader ? 0 : tries_), interval_ / 100);
  }
  if (leader) {
    // Never wait past the lease: renew before the local deadline.
    const auto left = valid_until_ - clock_->steady_now();
    wait = std::min(wait, left * 9 / 10);
  }
  return {std::max(wait, std::chrono::nanoseconds::zero()), leader};
}

void Election::Impl::start(std::stop_token stop_token) {
  reset_for_start();
  // After the reset: a token stopped already stops this run at once.
  std::stop_callback on_stop(stop_token, [this] { stop(); });
  std::thread deadline;
  auto finish = [&] {
    {
      std::lock_guard guard(mutex_);
      finished_ = true;
    }
    wake_.notify_all();
    if (deadline.joinable()) deadline.join();
    drop_watcher();
    deliver_pending_loss();
    std::lock_guard guard(mutex_);
    state_ = State::candidate;
    started_ = false;
  };
  const auto stopping = [this] {
    std::lock_guard guard(mutex_);
    return stopping_;
  };
  try {
    deadline = std::thread([this] { deadline_main({}); });
    wait_splay();
    while (!stopping()) {
      deliver_pending_loss();  // a deadline demotion is announced before anything else
      Callbacks after;
      campaign(after);
      run(after);
      deliver_pending_loss();
      if (stopping()) break;
      const auto [wait, leader] = next_wait();
      wait_watching(wait, leader);
    }
    Callbacks after;
    resign(after);
    run(after);
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

void Election::Impl::drop_watcher() {
  std::shared_ptr<Watcher> watcher;
  {
    std::lock_guard guard(mutex_);
    watcher.swap(watcher_);
  }
  // Outside the lock: stopping a watcher is a JetStream request.
  if (watcher) watcher->stop();
}

void Election::Impl::deliver_pending_loss() {
  Callbacks after;
  {
    std::lock_guard guard(mutex_);
    after.lost = std::exchange(pending_lost_, false);
  }
  run(after);
}

std::shared_ptr<Watcher> Election::Impl::watch_key() {
  std::shared_ptr<Watcher> watcher;
  {
    std::lock_guard guard(mutex_);
    watcher = watcher_;
  }
  if (watcher) return watcher;
  try {
    watcher = bucket_->watch(key_);
    leader_write_seen_.reset();  // a new watch replays the current value first
    bool stopped = false;
    {
      std::lock_guard guard(mutex_);
      watcher_ = watcher;
      stopped = stopping_;
    }
    if (stopped) watcher->stop();
  } catch (const BackendError& e) {
    log(std::string("cannot watch the key, polling instead: ") + e.what());
  }
  return watcher;
}

bool Election::Impl::wait_ends_on(const Entry& change, bool leader, std::uint64_t ours, Clock::SteadyTime& until) {
  if (leader) {
    // Our own renewals (this revision or older) are expected; anything
    // else means the key is no longer ours.
    if (change.operation == Entry::Operation::put && change.value == name_ && change.revision <= ours) return false;
    log(fmt::format("key {} changed by someone else at revision {}: renewing now", key_, change.revision));
    return true;
  }
  if (change.operation != Entry::Operation::put || change.value == resigned_marker) {
    log(fmt::format("key {} {} at revision {}: campaigning now", key_,
                    change.operation == Entry::Operation::put ? "resigned" : "deleted", change.revision));
    leader_write_seen_.reset();
    // Only fleetcron's resignation (its marker carries a header) lets the
    // winner announce at once: the leader announced its loss before
    // deleting. Any other delete (an operator's, choria's) is followed by
    // the usual announcement after a renewal.
    deletion_seen_ = change.operation != Entry::Operation::put && bucket_->is_resignation(change.revision);
    return true;
  }
  leader_write_seen_ = clock_->steady_now();
  until = std::min(until, *leader_write_seen_ + ttl_ + expiry_slack);
  return false;
}

void Election::Impl::wait_watching(std::chrono::nanoseconds wait, bool leader) {
  // Both roles wait on a watch of the key. A candidate campaigns at once on
  // a deletion or a resignation; a leader renews at once when anyone else
  // wrote or deleted the key, so it announces its loss within milliseconds
  // instead of at its next tick (the new winner announces only one
  // interval after its win: no two announced leaders even when ticks run
  // late). The watch is read on every wait, so it never piles up.
  std::shared_ptr<Watcher> watcher = watch_key();
  auto until = clock_->steady_now() + wait;
  // The leader's last write seen (local time): its key expires a TTL
  // later, which no watch reports, so campaign right then.
  if (!leader && leader_write_seen_ && *leader_write_seen_ + ttl_ + expiry_slack > clock_->steady_now()) {
    until = std::min(until, *leader_write_seen_ + ttl_ + expiry_slack);
  }
  while (true) {
    const auto now = clock_->steady_now();
    std::uint64_t ours = 0;
    {
      std::unique_lock lock(mutex_);
      if (stopping_ || now >= until || pending_lost_) return;
      if (leader && state_ != State::leader) return;  // demoted meanwhile
      ours = last_revision_;
      if (!watcher) {
        clock_->wait_until(wake_, lock, until);
        continue;
      }
    }
    try {
      const auto slice = std::min<std::chrono::nanoseconds>(until - now, watch_slice);
      const auto change =
          watcher->next(std::max(std::chrono::ceil<std::chrono::milliseconds>(slice), std::chrono::milliseconds{1}));
      if (change && wait_ends_on(*change, leader, ours, until)) return;
    } catch (const BackendError& e) {
      log(std::string("watch failed, polling instead: ") + e.what());
      watcher.reset();
      drop_watcher();
    }
  }
}

void Election::Impl::set_healthy(std::function<bool()> healthy) {
  std::lock_guard guard(mutex_);
  healthy_ = std::move(healthy);
}

void Election::Impl::campaign(Callbacks& after) {
  State state = State::candidate;
  std::function<bool()> healthy;
  {
    std::lock_guard guard(mutex_);
    state = state_;
    healthy = healthy_;
  }
  bool stalled = false;
  try {
    stalled = healthy && !healthy();
  } catch (...) {
    stalled = true;
  }
  if (stalled) {
    // A leader gives the key up at once (a revision-guarded delete, which
    // a candidate takes over without waiting for the TTL) — before the
    // error is recorded, which resign() reads as "the store is failing";
    // a candidate does not campaign.
    if (state == State::leader) resign(after);
    const std::string error = "the scheduler is unfit to lead (its loop is stalled, or it stepped down): not campaigning";
    {
      std::lock_guard guard(mutex_);
      last_error_ = error;
    }
    log(error);
    return;
  }
  if (options_.on_campaign) {
    std::lock_guard one_at_a_time(callback_mutex_);
    try {
      options_.on_campaign(state);
    } catch (...) {
      log("on_campaign threw");
    }
  }
  const auto sent = clock_->steady_now();
  if (state == State::leader) {
    maintain(after, sent);
  } else {
    campaign_as_candidate(after, sent);
  }
}

std::uint64_t Election::Impl::term_of(std::uint64_t revision) {
  std::chrono::sys_time<std::chrono::nanoseconds> at;
  try {
    at = bucket_->write_times(revision).written;
  } catch (const BackendError& e) {
    // The write's time cannot be read (the store failing just now): the
    // local clock stands in, within the skew of the server's.
    log(std::string("reading the winning write's time failed, using the local clock: ") + e.what());
    at = clock_->now();
  }
  return static_cast<std::uint64_t>(
      std::max<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count(), 1));
}

void Election::Impl::take_over(std::uint64_t revision, std::uint64_t term, bool announce_now, Clock::SteadyTime sent) {
  if (clock_->steady_now() >= sent + valid_for_) announce_now = false;  // took too long: the deadline thread demotes
  state_ = State::leader;
  last_revision_ = revision;
  won_revision_ = revision;
  won_term_ = term;
  valid_until_ = sent + valid_for_;
  notify_next_ = !announce_now;
  announced_ = announce_now;
  tries_ = 0;
  last_error_.clear();
  wake_.notify_all();  // the deadline thread re-arms
}

void Election::Impl::campaign_as_candidate(Callbacks& after, Clock::SteadyTime sent) {
  // A resignation marker the watcher just saw: the old leader announced
  // its loss before writing it, so the winner may announce at once.
  const bool after_deletion = std::exchange(deletion_seen_, false);
  try {
    if (const auto revision = bucket_->create(key_, name_)) {
      const std::uint64_t term = term_of(*revision);
      std::lock_guard guard(mutex_);
      take_over(*revision, term, after_deletion, sent);
      after.won = announced_;
      log(fmt::format("won {} at revision {} (term {}); {}", key_, *revision, term,
                      announced_ ? "announcing now: the key was deleted (a resignation)"
                                 : "announcing after the next renewal"));
      return;
    }
    // Taken. By a resignation (take it over and announce at once: the old
    // leader announced its loss before writing the marker), or by our own
    // record (a write whose reply was lost, or a lease we were demoted
    // from): take it back by compare-and-swap.
    {
      std::lock_guard guard(mutex_);
      if (stopping_) return;  // stop promptly: every request may take request_timeout
    }
    const auto entry = bucket_->get(key_);
    if (entry && entry->operation == Entry::Operation::put &&
        (entry->value == resigned_marker || entry->value == name_)) {
      const bool resigned = entry->value == resigned_marker;
      if (const auto revision = bucket_->update(key_, name_, entry->revision)) {
        const std::uint64_t term = term_of(*revision);
        std::lock_guard guard(mutex_);
        take_over(*revision, term, resigned, sent);
        after.won = announced_;
        log(fmt::format("took over {} at revision {} ({})", key_, *revision,
                        resigned ? "the leader resigned" : "our own record"));
        return;
      }
    }
    std::lock_guard guard(mutex_);
    ++tries_;
    last_error_.clear();
  } catch (const BackendError& e) {
    if (detail::missing(e)) recreate_bucket(e);
    std::lock_guard guard(mutex_);
    ++tries_;
    last_error_ = e.what();
    log(std::string("campaign create failed: ") + e.what());
  }
}

void Election::Impl::maintain(Callbacks& after, Clock::SteadyTime sent) {
  std::uint64_t last = 0, losses = 0;
  {
    std::lock_guard guard(mutex_);
    if (state_ != State::leader || last_revision_ == 0) return;  // demoted meanwhile: campaign next time
    last = last_revision_;
    losses = losses_;
  }
  std::optional<std::uint64_t> revision;
  std::string error;
  try {
    revision = bucket_->update(key_, name_, last);
  } catch (const BackendError& e) {
    error = e.what();
  }
  // A renewal that raced a demotion (the deadline thread) is a new win,
  // whose term is its write's server time, read without the lock. Losses
  // only grow, and without a race the lock is held from the check on, so
  // the check below finds a race exactly when new_term was read.
  std::optional<std::uint64_t> new_term;
  std::unique_lock lock(mutex_);
  if (revision && losses != losses_) {
    lock.unlock();
    new_term = term_of(*revision);
    lock.lock();
  }
  if (stopping_ && !error.empty()) return;  // our own stop interrupted it: the shutdown path decides
  last_error_ = error;
  if (revision && losses != losses_) {
    // Demoted by the deadline while this renewal was in flight (its loss
    // was announced): the key is ours again, as a new win.
    take_over(*revision, new_term.value_or(0), false, sent);
    return;
  }
  if (revision) {
    last_revision_ = *revision;
    valid_until_ = sent + valid_for_;
    wake_.notify_all();
    if (notify_next_ && clock_->steady_now() < valid_until_) {  // never announce an already expired lease
      notify_next_ = false;
      announced_ = true;
      after.won = true;
      log(fmt::format("leader of {} since revision {}", key_, won_revision_));
    }
    return;
  }
  log(fmt::format("key update failed, moving to candidate state: {}", error.empty() ? "revision changed" : error));
  lose_locked(after);
}

void Election::Impl::recreate_bucket(const BackendError& missing) {
  try {
    bucket_->recreate();
    log(fmt::format("bucket {} was missing ({}): created it again", bucket_->name(), missing.what()));
  } catch (const std::exception& e) {
    log(fmt::format("bucket {} is missing and could not be created again: {}", bucket_->name(), e.what()));
  }
}

void Election::Impl::lose_locked(Callbacks& after) {
  if (state_ != State::leader) return;
  lost_term_ = won_term_;
  state_ = State::candidate;
  last_revision_ = 0;
  won_revision_ = 0;
  won_term_ = 0;
  tries_ = 0;
  ++losses_;
  if (notify_next_) {
    notify_next_ = false;  // never announced: nothing to retract
  } else if (announced_) {
    announced_ = false;
    after.lost = true;
  }
}

void Election::Impl::resign(Callbacks& after) {
  std::uint64_t last = 0;
  bool reachable = true;
  {
    std::lock_guard guard(mutex_);
    if (state_ != State::leader) return;
    last = last_revision_;
    reachable = last_error_.empty();
    lose_locked(after);
  }
  // Announce the loss first, then free the key: a candidate that sees the
  // marker may announce at once without two announced leaders.
  run(after);
  after = {};
  if (last == 0 || !reachable) return;  // the store failed just now: let the key expire rather than wait again
  try {
    // A delete guarded by our last revision: it cannot remove a
    // successor's record, and a candidate of either implementation (choria's
    // Create succeeds over a delete marker) takes over at once.
    if (bucket_->remove_if(key_, last, /*resignation=*/true)) {
      log(fmt::format("resigned {}", key_));
    }
  } catch (const BackendError& e) {
    log(std::string("resign failed; the key expires with its TTL: ") + e.what());
  }
}

void Election::Impl::deadline_main(std::stop_token) {  // ends when start() finishes
  std::unique_lock lock(mutex_);
  while (!finished_) {
    const auto now = clock_->steady_now();
    if (state_ == State::leader && now >= valid_until_) {
      // Demote now (is_leader() turns false at once); the campaign thread
      // runs on_lost as soon as it is back from any KV call, so callbacks
      // never run here (one of them may join the threads).
      Callbacks after;
      lose_locked(after);
      pending_lost_ = pending_lost_ || after.lost;
      wake_.notify_all();
      lock.unlock();
      log(fmt::format("not renewed within {}: demoted", format_duration(valid_for_)));
      lock.lock();
      continue;
    }
    if (state_ == State::leader) {
      clock_->wait_until(wake_, lock, valid_until_);
    } else {
      clock_->wait_until(wake_, lock, now + std::chrono::seconds{1});
    }
  }
}

void check_election_ttl(std::chrono::nanoseconds ttl) {
  // The reference's messages, word for word.
  if (ttl < min_election_ttl) throw std::invalid_argument("bucket TTL should be 10 seconds or more");
  if (ttl > max_election_ttl) throw std::invalid_argument("bucket TTL should be less than or equal to 1 hour");
}

}  // namespace fleetcron::nats
