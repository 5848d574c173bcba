// Redis: claims, the lease and the fleet state on one client (Sentinel and
// TLS included); the maxmemory-policy is its configuration to check.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "fleetcron/redis/build_info.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/diagnostics.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/fleet_state.h"
#include "fleetcron/redis/inspection.h"
#include "fleetcron/redis/uri.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

/// The coordinator URI's options, with the password from
/// Settings::coordinator_password when one was given that way.
redis::ClientOptions client_options(const Settings& settings) {
  redis::ClientOptions options = redis::parse_uri(settings.coordinator).connection;
  if (!settings.coordinator_password.empty()) options.password = settings.coordinator_password;
  return options;
}

redis::ClaimerOptions claimer_options(const Settings& settings) {
  return redis::ClaimerOptions{.claim_prefix = settings.claim_prefix, .claim_ttl = settings.claim_ttl,
                               .max_clock_skew = max_clock_skew(settings)};
}

/// Claims: prefix + key@RFC3339; those of the last hour, counted per job.
std::string recent_claims(redis::Client& client, const std::string& claim_prefix) {
  const Instant cutoff = system_clock()->now() - std::chrono::hours{1};
  std::map<std::string, std::pair<std::size_t, std::string>> per_job;  // key -> (count, latest)
  redis::scan_claims(client, claim_prefix, [&](std::string_view fire_key) {
    const auto at = fire_key.rfind('@');
    Instant scheduled{};
    try {
      scheduled = parse_rfc3339(fire_key.substr(at + 1));
    } catch (const std::exception&) {
      return;
    }
    if (scheduled < cutoff) return;
    auto& [count, latest] = per_job[std::string(fire_key.substr(0, at))];
    ++count;
    latest = std::max(latest, std::string(fire_key.substr(at + 1)));
  });
  std::string text = fmt::format("claims in the last hour ({} job(s)):\n", per_job.size());
  for (const auto& [key, entry] : per_job) {
    text += fmt::format("  {}  {} claim(s), latest {}\n", terminal_safe(key), entry.first, terminal_safe(entry.second));
  }
  return text;
}

class RedisBackend final : public Backend {
 public:
  std::string_view name() const override { return "Redis"; }
  std::string_view forms() const override { return "redis://…, rediss://…, redis-sentinel://…, rediss-sentinel://…, unix:…"; }
  std::string build_info() const override { return redis::build_info(); }
  bool accepts(std::string_view coordinator) const override { return redis::is_redis_uri(coordinator); }
  std::string_view password_variable() const override { return "FLEETCRON_REDIS_PASSWORD"; }
  bool checks_config() const override { return true; }

  Coordination connect(const Settings& settings, const std::string& holder) const override {
    Coordination out;
    auto client = std::make_shared<redis::Client>(client_options(settings));
    out.description = client->describe();
    if (client->options().tls && !client->options().tls_verify) {
      out.warnings.emplace_back("tls-unverified",
                                fmt::format("{}: TLS without verifying the server's certificate or name "
                                            "(tls_verify=false): anyone on the path can pose as the server",
                                            out.description));
    }
    std::shared_ptr<redis::Claimer> claimer;
    if (settings.coordination != CoordinationMode::leader) {
      claimer = std::make_shared<redis::Claimer>(client, claimer_options(settings));
      out.claimer = claimer;
    }
    if (settings.coordination != CoordinationMode::claim) {
      redis::ElectorOptions options;
      if (!settings.leader_key.empty()) options.leader_key = settings.leader_key;
      options.lease.lease_ttl = settings.leader_ttl.value_or(redis::default_leader_ttl);
      options.lease.keep_alive = true;
      options.holder = holder;
      out.elector = std::make_shared<redis::Elector>(client, options);
    }
    if (keeps_fleet_state(settings)) {
      out.fleet_state = std::make_shared<redis::FleetState>(
          client, redis::FleetStateOptions{.fleet_prefix = effective_fleet_prefix(settings)});
    }
    out.diagnostics = redis::make_diagnostics(client, std::move(claimer));
    out.resources = client;
    return out;
  }

  std::shared_ptr<Claimer> offline_claimer(const Settings& settings) const override {
    if (settings.coordination == CoordinationMode::leader) return nullptr;
    // Neither constructor touches the network.
    return std::make_shared<redis::Claimer>(std::make_shared<redis::Client>(client_options(settings)),
                                            claimer_options(settings));
  }

  StoreView read_view(const Settings& settings, bool with_claims) const override try {
    redis::Client client(client_options(settings));
    StoreView view{client.describe(), {}, {}};
    const std::string leader_key =
        settings.leader_key.empty() ? std::string(redis::default_leader_key) : settings.leader_key;
    const redis::LeaseRecord lease = redis::read_lease(client, leader_key);
    // What the store holds is escaped: it cannot forge lines or send
    // terminal control sequences.
    if (lease.holder) {
      view.leader = {lease.holder, lease.term, lease.expires_in.count(), std::nullopt};
      view.text = fmt::format("leader: \"{}\" (term {}, lease expires in {} ms)\n", terminal_safe(*lease.holder),
                              lease.term ? terminal_safe(*lease.term) : std::string("unknown"), lease.expires_in.count());
    } else {
      view.text = "leader: none\n";
    }
    if (with_claims) view.text += recent_claims(client, settings.claim_prefix);
    return view;
  } catch (const BackendError& e) {
    // The message carries the server's reply text (NOAUTH, NOPERM, …):
    // escaped, like everything else read from the store.
    throw std::runtime_error(terminal_safe(e.what()));
  }

  std::shared_ptr<FleetState> open_fleet_state(const Settings& settings) const override {
    return std::make_shared<redis::FleetState>(std::make_shared<redis::Client>(client_options(settings)),
                                               redis::FleetStateOptions{.fleet_prefix = effective_fleet_prefix(settings)});
  }

  int init(const Settings& settings, std::ostream& out, std::ostream& err) const override;

 protected:
  std::optional<ReplicaSetting> claim_place(const Settings& settings) const override {
    return ReplicaSetting{"claim_prefix", settings.claim_prefix};
  }
  std::chrono::nanoseconds default_leader_ttl() const override { return redis::default_leader_ttl; }
  std::vector<ReplicaSetting> lease_place(const Settings& settings) const override {
    return {{"leader_key", settings.leader_key.empty() ? std::string(redis::default_leader_key) : settings.leader_key}};
  }
};

int RedisBackend::init(const Settings& settings, std::ostream& out, std::ostream& err) const {
  auto client = std::make_shared<redis::Client>(client_options(settings));
  redis::Claimer claimer(client, claimer_options(settings));
  const redis::NewStoreDeclaration answer = claimer.declare_new_store();
  const std::string& epoch_key = claimer.options().epoch_key;
  switch (answer.status) {
    case redis::NewStoreDeclaration::Status::declared:
      out << fmt::format("init: {}: declared new: wrote {} = \"{}\"; no fire is refused as scheduled before a reset, "
                         "and a later restart without data or a failover is still detected\n",
                         client->describe(), epoch_key, answer.found);
      return 0;
    case redis::NewStoreDeclaration::Status::has_epoch:
      out << fmt::format("init: {}: already has its epoch record {} = \"{}\" (an earlier init, or a replica that "
                         "claimed first); nothing written\n",
                         client->describe(), epoch_key, answer.found);
      return 0;
    case redis::NewStoreDeclaration::Status::holds_claims:
      err << fmt::format("init: {}: not new: it holds the fence counter {} = {} (claims were made here) but no "
                         "epoch record, so it may have lost data; nothing written (the replicas decide at their "
                         "first claim)\n",
                         client->describe(), claimer.options().fence_key, answer.found);
      return 1;
  }
  return 1;
}

}  // namespace

const Backend& redis_backend() {
  static const RedisBackend backend;
  return backend;
}

}  // namespace fleetcron::daemon
