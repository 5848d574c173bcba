// nats::Elector: the scheduler's Elector over an Election campaigning on a
// thread of its own.
#include "fleetcron/nats/elector.h"

#include <fmt/format.h>
#include <nats/nats.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>

#include "fleetcron/nats/election.h"

namespace fleetcron::nats {

namespace {

std::string default_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
  std::random_device random;
  return fmt::format("{}-{}-{:08x}", host, getpid(), random());
}

}  // namespace

struct FLEETCRON_LOCAL Elector::Impl {
  std::string name;
  std::unique_ptr<Election> election;
  std::mutex mutex;  // guards lost
  std::function<void(std::uint64_t)> lost;
  std::stop_source stop;
  std::mutex join_mutex;
  std::thread thread;
};

Elector::Elector(std::shared_ptr<Bucket> bucket, ElectorOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.name = options.name.empty() ? default_name() : options.name;
  auto election_options = std::move(options.election);
  auto user_lost = std::move(election_options.on_lost);
  election_options.on_lost = [&impl, user_lost] {
    std::function<void(std::uint64_t)> lost;
    {
      std::lock_guard guard(impl.mutex);
      lost = impl.lost;
    }
    const std::uint64_t term = impl.election->last_lost_term();
    if (lost && term != 0) lost(term);
    if (user_lost) user_lost();
  };
  impl.election = std::make_unique<Election>(impl.name, options.leader_key, std::move(bucket), std::move(election_options));
  // The stop token, not stop(): a resign() that comes before start() has
  // begun must still end it.
  impl.thread = std::thread([&impl, token = impl.stop.get_token()] {
    try {
      impl.election->start(token);
    } catch (...) {
      // start() throws only for a second start or a failure to create its
      // threads; is_leader() then answers follower.
    }
    nats_ReleaseThreadMemory();
  });
}

Elector::~Elector() { resign(); }

Leadership Elector::is_leader() {
  const auto [leader, term] = impl_->election->leadership();
  if (leader) return Leadership::leader(term);
  std::string error = impl_->election->last_error();
  if (!error.empty()) return Leadership::failed(std::move(error));
  return Leadership::follower();
}

void Elector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  std::lock_guard guard(impl_->mutex);
  impl_->lost = std::move(lost);
}

void Elector::resign() {
  impl_->stop.request_stop();
  impl_->election->stop();
  std::lock_guard guard(impl_->join_mutex);
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) impl_->thread.join();
}

void Elector::set_liveness(std::function<bool()> alive) { impl_->election->set_healthy(std::move(alive)); }

const std::string& Elector::name() const noexcept { return impl_->name; }

Election& Elector::election() noexcept { return *impl_->election; }

}  // namespace fleetcron::nats
