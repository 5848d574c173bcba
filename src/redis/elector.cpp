#include "fleetcron/redis/elector.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "fleetcron/duration.h"
#include "redis/commands.h"
#include "redis/replies.h"
#include "redis/scripts.h"

namespace fleetcron::redis {

namespace {

const Script& campaign_script() {
  static const Script script(detail::campaign_script);
  return script;
}

const Script& resign_script() {
  static const Script script(detail::resign_script);
  return script;
}

// 16 bytes from the OS random source, as 32 lowercase hex digits.
std::string random_identity() {
  std::array<unsigned char, 16> bytes{};
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("redis::Elector: the OS random source failed: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  std::string hex;
  hex.reserve(32);
  for (const unsigned char byte : bytes) hex += fmt::format("{:02x}", byte);
  return hex;
}

std::string trim(std::string_view text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && space(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

}  // namespace

class FLEETCRON_LOCAL Elector::Impl {
 public:
  Impl(std::shared_ptr<Client> client, ElectorOptions options);
  ~Impl();
  Leadership is_leader();
  void on_leadership_lost(std::function<void(std::uint64_t term)> lost);
  void resign();
  void set_liveness(std::function<bool()> alive);
  ElectorState state() const;

  std::string identity_;
  ElectorOptions options_;

 private:
  /// Deletes the lease if we hold it, demotes, reports the loss.
  void release_lease();
  Leadership campaign();
  void keep_alive_main();
  void stop_keep_alive();
  /// Drops leadership locally; returns the term lost (0 if not leading).
  std::uint64_t demote_locked();
  void notify_lost(std::uint64_t term);

  std::shared_ptr<Client> client_;
  std::shared_ptr<Clock> clock_;
  std::string ttl_ms_;
  std::chrono::nanoseconds valid_for_;  // lease_ttl - renew_margin

  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool leader_ = false;
  bool fresh_term_ = false;  // the lease must be taken with a new term (after a local demotion)
  std::uint64_t demotions_ = 0;  // counts demote_locked() calls that dropped a term
  std::uint64_t term_ = 0;
  Clock::SteadyTime valid_until_{};
  std::string last_error_;
  std::function<void(std::uint64_t)> lost_;
  bool stopping_ = false;
  bool resigned_ = false;  // set by resign(): is_leader() answers follower from then on
  std::function<bool()> alive_;  // set_liveness()
  std::mutex join_mutex_;  // serialises joining keep_alive_
  std::thread keep_alive_;
  std::mutex campaign_mutex_;  // one round trip at a time: answers apply in order
};

Elector::Elector(std::shared_ptr<Client> client, ElectorOptions options)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(options))) {}
Elector::~Elector() = default;
Leadership Elector::is_leader() { return impl_->is_leader(); }
void Elector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  impl_->on_leadership_lost(std::move(lost));
}
void Elector::resign() { impl_->resign(); }
void Elector::set_liveness(std::function<bool()> alive) { impl_->set_liveness(std::move(alive)); }
const std::string& Elector::identity() const noexcept { return impl_->identity_; }
ElectorState Elector::state() const { return impl_->state(); }
const ElectorOptions& Elector::options() const noexcept { return impl_->options_; }

Elector::Impl::Impl(std::shared_ptr<Client> client, ElectorOptions options)
    : options_(std::move(options)), client_(std::move(client)) {
  if (!client_) throw std::invalid_argument("redis::Elector: client is null");
  options_.leader_key = trim(options_.leader_key);
  if (options_.leader_key.empty()) throw std::invalid_argument("redis::ElectorOptions.leader_key: empty");
  if (options_.lease_ttl < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(fmt::format("redis::ElectorOptions.lease_ttl: {} is below the minimum of 1ms",
                                            format_duration(options_.lease_ttl)));
  }
  if (!options_.renew_margin) options_.renew_margin = options_.lease_ttl / 5;
  if (*options_.renew_margin < std::chrono::nanoseconds::zero() || *options_.renew_margin >= options_.lease_ttl) {
    throw std::invalid_argument(fmt::format("redis::ElectorOptions.renew_margin: {} is outside 0 .. lease_ttl {}",
                                            format_duration(*options_.renew_margin),
                                            format_duration(options_.lease_ttl)));
  }
  if (options_.follower_poll_interval < std::chrono::milliseconds{1}) {
    throw std::invalid_argument(fmt::format("redis::ElectorOptions.follower_poll_interval: {} is below 1ms",
                                            format_duration(options_.follower_poll_interval)));
  }
  if (options_.term_key.empty()) options_.term_key = options_.leader_key + ":term";
  if (options_.term_key == options_.leader_key) {
    throw std::invalid_argument("redis::ElectorOptions.term_key: the same key as leader_key");
  }
  clock_ = options_.clock ? options_.clock : system_clock();
  identity_ = random_identity();
  ttl_ms_ = std::to_string(std::chrono::ceil<std::chrono::milliseconds>(options_.lease_ttl).count());
  valid_for_ = options_.lease_ttl - *options_.renew_margin;
  if (options_.keep_alive) keep_alive_ = std::thread([this] { keep_alive_main(); });
}

Elector::Impl::~Impl() { stop_keep_alive(); }

void Elector::Impl::stop_keep_alive() {
  std::lock_guard join_once(join_mutex_);
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (keep_alive_.joinable() && keep_alive_.get_id() != std::this_thread::get_id()) keep_alive_.join();
}

std::uint64_t Elector::Impl::demote_locked() {
  if (!leader_) return 0;
  leader_ = false;
  fresh_term_ = true;  // whatever happened meanwhile, the next lease is a new term
  ++demotions_;
  return term_;
}

void Elector::Impl::notify_lost(std::uint64_t term) {
  if (term == 0) return;
  std::function<void(std::uint64_t)> lost;
  {
    std::lock_guard guard(mutex_);
    lost = lost_;
  }
  if (lost) lost(term);
}

void Elector::Impl::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  std::lock_guard guard(mutex_);
  lost_ = std::move(lost);
}

Leadership Elector::Impl::is_leader() {
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

Leadership Elector::Impl::campaign() {
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
  std::string error;
  std::optional<std::uint64_t> won;  // set: leader of this term
  try {
    const std::array<std::string, 2> keys{options_.leader_key, options_.term_key};
    const std::array<std::string, 4> args{identity_, ttl_ms_, std::to_string(known), fresh ? "1" : "0"};
    const Reply reply = client_->impl().eval(campaign_script(), keys, args);
    const detail::CampaignReply answer =
        reply.is_error() ? detail::CampaignReply{reply.text, false, 0} : detail::parse_campaign_reply(reply);
    if (!answer.error.empty()) {
      error = fmt::format("{}: {}", client_->describe(), answer.error);
    } else if (answer.leader) {
      won = answer.term;
    }
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = client_->describe() + ": campaign failed";
  }
  Leadership answer;
  {
    std::lock_guard guard(mutex_);
    last_error_ = error;
    if (!error.empty()) {
      // Still leader until the local deadline; the fire is skipped anyway.
      if (leader_ && clock_->steady_now() >= valid_until_) lost = demote_locked();
      answer = Leadership::failed(error);
    } else if (won && demotions != demotions_) {
      // Demoted (deadline passed) while this renewal was in flight: that
      // term was reported lost, so it must not come back. The next
      // campaign takes the lease with a new term.
      answer = Leadership::failed("leadership lapsed during the renewal; taking it again with a new term");
    } else if (won) {
      if (leader_ && *won != term_) lost = term_;  // a different term: the old one ended
      leader_ = true;
      fresh_term_ = false;
      term_ = *won;
      valid_until_ = sent + valid_for_;
      answer = Leadership::leader(*won);
    } else {
      lost = demote_locked();
      answer = Leadership::follower();
    }
  }
  one_at_a_time.unlock();
  notify_lost(lost);
  return answer;
}

void Elector::Impl::set_liveness(std::function<bool()> alive) {
  std::lock_guard guard(mutex_);
  alive_ = std::move(alive);
}

void Elector::Impl::keep_alive_main() {
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

void Elector::Impl::resign() {
  {
    std::lock_guard guard(mutex_);
    resigned_ = true;  // first: no is_leader() campaigns from here on
  }
  stop_keep_alive();
  release_lease();
}

void Elector::Impl::release_lease() {
  std::unique_lock one_at_a_time(campaign_mutex_);
  // Demoted here before the key goes: once the server deletes it another
  // replica may lead, and this one must not answer leader meanwhile (the
  // wedged-scheduler test caught the window under ASan).
  std::uint64_t lost = 0;
  {
    std::lock_guard guard(mutex_);
    lost = demote_locked();
  }
  std::string error;
  try {
    const std::array<std::string, 1> keys{options_.leader_key};
    const std::array<std::string, 1> args{identity_};
    const Reply reply = client_->impl().eval(resign_script(), keys, args);
    if (reply.is_error()) error = fmt::format("{}: resign: {}", client_->describe(), reply.text);
  } catch (const std::exception& e) {
    error = e.what();  // the lease then ends with its TTL
  } catch (...) {
    error = client_->describe() + ": resign failed";
  }
  if (!error.empty()) {
    std::lock_guard guard(mutex_);
    last_error_ = error;
  }
  one_at_a_time.unlock();
  notify_lost(lost);
}

ElectorState Elector::Impl::state() const {
  std::lock_guard guard(mutex_);
  ElectorState state;
  state.leader = leader_;
  state.term = term_;
  if (leader_) state.valid_until = valid_until_;
  state.last_error = last_error_;
  return state;
}

}  // namespace fleetcron::redis
