#include "fleetcron/backend/lease_elector.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "fleetcron/duration.h"

namespace fleetcron {

std::string random_hex(std::size_t bytes) {
  if (bytes == 0 || bytes > 64) throw std::invalid_argument(fmt::format("random_hex: {} bytes, not 1 to 64", bytes));
  std::array<unsigned char, 64> buffer{};
  std::size_t filled = 0;
  while (filled < bytes) {
    const ssize_t got = getrandom(buffer.data() + filled, bytes - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("the OS random source failed: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  std::string hex;
  hex.reserve(2 * bytes);
  for (std::size_t i = 0; i < bytes; ++i) hex += fmt::format("{:02x}", buffer[i]);
  return hex;
}

class FLEETCRON_LOCAL LeaseElector::Impl {
 public:
  Impl(std::shared_ptr<LeaseStore> store, std::string identity, LeaseElectorOptions options,
       std::string_view options_name);
  ~Impl();
  Leadership is_leader();
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost);
  void resign();
  void set_liveness(std::function<bool()> alive);
  ElectorState state() const;

  std::string identity_;
  LeaseElectorOptions options_;

 private:
  /// Deletes the lease if we hold it, demotes, reports the loss.
  void release_lease();
  Leadership campaign();
  /// The store's answer to one campaign, applied; returns the answer and the term lost (0: none).
  std::pair<Leadership, std::uint64_t> apply(const LeaseAnswer& reply, Clock::SteadyTime sent, std::uint64_t demotions);
  void keep_alive_main();
  void stop_keep_alive();
  /// Drops leadership locally; returns the term lost (0 if not leading).
  std::uint64_t demote_locked();
  void notify_lost(std::uint64_t term);

  std::shared_ptr<LeaseStore> store_;
  std::shared_ptr<Clock> clock_;
  std::chrono::nanoseconds valid_for_;  // lease_ttl - renew_margin

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool leader_ = false;
  bool fresh_term_ = false;      // the lease must be taken with a new term (after a local demotion)
  std::uint64_t demotions_ = 0;  // counts demote_locked() calls that dropped a term
  std::uint64_t term_ = 0;
  Clock::SteadyTime valid_until_{};
  std::string last_error_;
  std::function<void(std::uint64_t)> lost_;
  bool stopping_ = false;
  bool resigned_ = false;        // set by resign(): is_leader() answers follower from then on
  std::function<bool()> alive_;  // set_liveness()
  std::mutex join_mutex_;        // serialises joining keep_alive_
  std::thread keep_alive_;
  std::mutex campaign_mutex_;  // one round trip at a time: answers apply in order
};

LeaseElector::LeaseElector(std::shared_ptr<LeaseStore> store, std::string identity, LeaseElectorOptions options,
                           std::string_view options_name)
    : impl_(std::make_unique<Impl>(std::move(store), std::move(identity), std::move(options), options_name)) {}
LeaseElector::~LeaseElector() = default;
Leadership LeaseElector::is_leader() { return impl_->is_leader(); }
void LeaseElector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  impl_->on_leadership_lost(std::move(lost));
}
void LeaseElector::resign() { impl_->resign(); }
void LeaseElector::set_liveness(std::function<bool()> alive) { impl_->set_liveness(std::move(alive)); }
const std::string& LeaseElector::identity() const noexcept { return impl_->identity_; }
ElectorState LeaseElector::state() const { return impl_->state(); }
const LeaseElectorOptions& LeaseElector::options() const noexcept { return impl_->options_; }

LeaseElector::Impl::Impl(std::shared_ptr<LeaseStore> store, std::string identity, LeaseElectorOptions options,
                         std::string_view options_name)
    : identity_(std::move(identity)), options_(std::move(options)), store_(std::move(store)) {
  if (!store_) throw std::invalid_argument(fmt::format("{}: the lease store is null", options_name));
  if (identity_.empty()) throw std::invalid_argument(fmt::format("{}: the identity is empty", options_name));
  if (options_.lease_ttl < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(
        fmt::format("{}.lease_ttl: {} is below the minimum of 1ms", options_name, format_duration(options_.lease_ttl)));
  }
  if (!options_.renew_margin) options_.renew_margin = options_.lease_ttl / 5;
  if (*options_.renew_margin < std::chrono::nanoseconds::zero() || *options_.renew_margin >= options_.lease_ttl) {
    throw std::invalid_argument(fmt::format("{}.renew_margin: {} is outside 0 .. lease_ttl {}", options_name,
                                            format_duration(*options_.renew_margin),
                                            format_duration(options_.lease_ttl)));
  }
  if (options_.follower_poll_interval < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(fmt::format("{}.follower_poll_interval: {} is below 1ms", options_name,
                                            format_duration(options_.follower_poll_interval)));
  }
  clock_ = options_.clock ? options_.clock : system_clock();
  valid_for_ = options_.lease_ttl - *options_.renew_margin;
  if (options_.keep_alive) keep_alive_ = std::thread([this] { keep_alive_main(); });
}

LeaseElector::Impl::~Impl() { stop_keep_alive(); }

void LeaseElector::Impl::stop_keep_alive() {
  std::lock_guard join_once(join_mutex_);
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (keep_alive_.joinable() && keep_alive_.get_id() != std::this_thread::get_id()) keep_alive_.join();
}

std::uint64_t LeaseElector::Impl::demote_locked() {
  if (!leader_) return 0;
  leader_ = false;
  fresh_term_ = true;  // whatever happened meanwhile, the next lease is a new term
  ++demotions_;
  return term_;
}

void LeaseElector::Impl::notify_lost(std::uint64_t term) {
  if (term == 0) return;
  std::function<void(std::uint64_t)> lost;
  {
    std::lock_guard guard(mutex_);
    lost = lost_;
  }
  if (lost) lost(term);
}

void LeaseElector::Impl::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  std::lock_guard guard(mutex_);
  lost_ = std::move(lost);
}

Leadership LeaseElector::Impl::is_leader() {
  std::uint64_t lost = 0;
  {
    std::lock_guard guard(mutex_);
    // Resigned for good: a drain still asking for queued fires must not
    // take the lease back (with no keep-alive left to renew or free it).
    if (resigned_) return Leadership::follower();
    const bool cached = options_.keep_alive && !stopping_;
    if (leader_ && clock_->steady_now() >= valid_until_) lost = demote_locked();  // renew deadline passed
    if (cached && lost == 0) {
      if (leader_) return Leadership::leader(term_);
      if (!last_error_.empty()) return Leadership::failed(last_error_);
      return Leadership::follower();
    }
  }
  notify_lost(lost);
  {
    std::lock_guard guard(mutex_);
    if (options_.keep_alive && !stopping_) {
      // Demoted by the deadline while the keep-alive round trip is stuck.
      return last_error_.empty() ? Leadership::failed("lease not renewed before its local deadline")
                                 : Leadership::failed(last_error_);
    }
  }
  return campaign();
}

Leadership LeaseElector::Impl::campaign() {
  std::uint64_t lost = 0;
  {
    std::lock_guard guard(mutex_);
    if (leader_ && clock_->steady_now() >= valid_until_) lost = demote_locked();
  }
  notify_lost(lost);  // never under a lock: the callback may call back into us or stop the scheduler
  lost = 0;
  std::unique_lock one_at_a_time(campaign_mutex_);
  std::uint64_t known = 0;
  bool fresh = false;
  std::uint64_t demotions = 0;
  const auto sent = clock_->steady_now();
  {
    std::lock_guard guard(mutex_);
    if (leader_ && sent >= valid_until_) lost = demote_locked();
    known = term_;
    fresh = fresh_term_;
    demotions = demotions_;
  }
  LeaseAnswer reply;
  try {
    reply = store_->campaign(identity_, options_.lease_ttl, known, fresh);
  } catch (const std::exception& e) {
    reply = LeaseAnswer{false, 0, e.what()};
  } catch (...) {
    reply = LeaseAnswer{false, 0, "campaign failed"};
  }
  auto [answer, lost_now] = apply(reply, sent, demotions);
  one_at_a_time.unlock();
  notify_lost(lost);  // demoted at `sent`: then lost_now is 0 (no longer leader)
  notify_lost(lost_now);
  return answer;
}

std::pair<Leadership, std::uint64_t> LeaseElector::Impl::apply(const LeaseAnswer& reply, Clock::SteadyTime sent,
                                                               std::uint64_t demotions) {
  std::lock_guard guard(mutex_);
  last_error_ = reply.error;
  std::uint64_t lost = 0;
  if (!reply.error.empty()) {
    // Still leader until the local deadline; the fire is skipped anyway.
    if (leader_ && clock_->steady_now() >= valid_until_) lost = demote_locked();
    return {Leadership::failed(reply.error), lost};
  }
  if (reply.leader && demotions != demotions_) {
    // Demoted (deadline passed) while this renewal was in flight: that
    // term was reported lost, so it must not come back. The next campaign
    // takes the lease with a new term.
    return {Leadership::failed("leadership lapsed during the renewal; taking it again with a new term"), 0};
  }
  if (!reply.leader) return {Leadership::follower(), demote_locked()};
  if (leader_ && reply.term != term_) lost = term_;  // a different term: the old one ended
  leader_ = true;
  fresh_term_ = false;
  term_ = reply.term;
  valid_until_ = sent + valid_for_;
  return {Leadership::leader(reply.term), lost};
}

void LeaseElector::Impl::set_liveness(std::function<bool()> alive) {
  std::lock_guard guard(mutex_);
  alive_ = std::move(alive);
}

void LeaseElector::Impl::keep_alive_main() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto alive = alive_;
    lock.unlock();
    Leadership answer;
    bool stalled = false;
    try {
      stalled = alive && !alive();
    } catch (...) {
      stalled = true;
    }
    if (stalled) {
      // The scheduler cannot run fires (its loop is wedged, or its claims
      // keep failing): a leader that renews now keeps the fleet without
      // one. Free the lease at once, and do not campaign while it lasts.
      bool leading = false;
      {
        std::lock_guard guard(mutex_);
        leading = leader_;
      }
      if (leading) release_lease();
      answer = Leadership::follower();  // not an error of the store: fires are skipped not-leader
    } else {
      answer = campaign();  // never throws: failures are answers
    }
    lock.lock();
    if (stopping_) break;
    // Renew at a third of the TTL (at most half the local validity, so a
    // large renew_margin still renews before its deadline); retry sooner
    // after an error, but never sleep past the deadline of a lease we hold.
    auto period = std::min<std::chrono::nanoseconds>(options_.lease_ttl / 3, valid_for_ / 2);
    if (!leader_) period = std::min(period, options_.follower_poll_interval);  // take a freed lease quickly
    auto next = clock_->steady_now() + (answer.status == Leadership::Status::error ? period / 2 : period);
    if (leader_) next = std::min(next, valid_until_);
    while (!stopping_ && clock_->steady_now() < next) clock_->wait_until(wake_, lock, next);
  }
}

void LeaseElector::Impl::resign() {
  {
    std::lock_guard guard(mutex_);
    resigned_ = true;  // first: no is_leader() campaigns from here on
  }
  stop_keep_alive();
  release_lease();
}

void LeaseElector::Impl::release_lease() {
  std::unique_lock one_at_a_time(campaign_mutex_);
  // Demoted here before the lease goes: once the store deletes it another
  // replica may lead, and this one must not answer leader meanwhile (the
  // wedged-scheduler test caught the window under ASan).
  std::uint64_t lost = 0;
  {
    std::lock_guard guard(mutex_);
    lost = demote_locked();
  }
  std::string error;
  try {
    error = store_->release(identity_);  // on failure the lease ends with its TTL
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "resign failed";
  }
  if (!error.empty()) {
    std::lock_guard guard(mutex_);
    last_error_ = error;
  }
  one_at_a_time.unlock();
  notify_lost(lost);
}

ElectorState LeaseElector::Impl::state() const {
  std::lock_guard guard(mutex_);
  ElectorState state;
  state.leader = leader_;
  state.term = term_;
  if (leader_) state.valid_until = valid_until_;
  state.last_error = last_error_;
  return state;
}

}  // namespace fleetcron
