#include "daemon/run/coordination_setup.h"

#include <fmt/format.h>

#include <chrono>

#include "fleetcron/duration.h"
#include "fleetcron/memory_coordination.h"
#include "fleetcron/memory_fleet_state.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/nats/elector.h"
#include "fleetcron/nats/fleet_state.h"
#include "fleetcron/nats/uri.h"
#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/elector.h"
#include "fleetcron/postgres/fleet_state.h"
#include "fleetcron/postgres/uri.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/fleet_state.h"

namespace fleetcron::daemon {

namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

/// Times claims and counts their failures.
class MeasuredClaimer final : public Claimer {
 public:
  MeasuredClaimer(std::shared_ptr<Claimer> inner, Metrics& metrics) : inner_(std::move(inner)), metrics_(metrics) {}
  ClaimResult claim(std::string_view fire_key) override {
    const auto start = SteadyClock::now();
    ClaimResult result = inner_->claim(fire_key);
    record(result, start);
    return result;
  }
  std::vector<ClaimResult> claim_batch(std::span<const std::string> fire_keys) override {
    const auto start = SteadyClock::now();
    std::vector<ClaimResult> results = inner_->claim_batch(fire_keys);
    metrics_.backend_latency(seconds_since(start));
    for (const auto& result : results) {
      if (result.status == ClaimResult::Status::error) metrics_.backend_error();
    }
    return results;
  }
  // Forwarded, or the scheduler would claim fires of any age (the chaos
  // run found it: a daemon paused past the claim TTL ran fires again).
  std::chrono::nanoseconds dedup_window() const override { return inner_->dedup_window(); }
  void check_entry_key(std::string_view key) const override { inner_->check_entry_key(key); }

 private:
  void record(const ClaimResult& result, SteadyClock::time_point start) {
    metrics_.backend_latency(seconds_since(start));
    if (result.status == ClaimResult::Status::error) metrics_.backend_error();
  }
  std::shared_ptr<Claimer> inner_;
  Metrics& metrics_;
};

/// Times elections, counts failures, and reports leadership to the metrics.
class MeasuredElector final : public Elector {
 public:
  MeasuredElector(std::shared_ptr<Elector> inner, Metrics& metrics) : inner_(std::move(inner)), metrics_(metrics) {}
  Leadership is_leader() override {
    const auto start = SteadyClock::now();
    Leadership answer = inner_->is_leader();
    metrics_.backend_latency(seconds_since(start));
    if (answer.status == Leadership::Status::error) metrics_.backend_error();
    metrics_.leader(answer.status == Leadership::Status::leader, answer.term);
    return answer;
  }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override {
    inner_->on_leadership_lost([this, lost](std::uint64_t term) {
      metrics_.leader(false, term);
      if (lost) lost(term);
    });
    if (!lost) inner_->on_leadership_lost({});
  }
  void resign() override { inner_->resign(); }
  void set_liveness(std::function<bool()> alive) override { inner_->set_liveness(std::move(alive)); }

 private:
  std::shared_ptr<Elector> inner_;
  Metrics& metrics_;
};

/// NATS: its Claimer and Elector on one lazy connection (they fail closed
/// until the server answers).
struct NatsCoordination {
  std::shared_ptr<nats::Connection> connection;
  std::shared_ptr<nats::Claimer> claimer;
  std::shared_ptr<nats::Elector> elector;
  std::shared_ptr<nats::FleetState> fleet_state;
};

NatsCoordination make_nats(const nats::ConnectionOptions& options, const Settings& settings,
                           const std::string& holder) {
  NatsCoordination out;
  out.connection = nats::Connection::connect(options);
  if (settings.coordination != CoordinationMode::leader) {
    out.claimer = std::make_shared<nats::Claimer>(out.connection->bucket(claim_bucket_config(settings)),
                                                  nats::ClaimerOptions{.max_clock_skew = max_clock_skew(settings)});
  }
  if (settings.coordination != CoordinationMode::claim) {
    nats::ElectorOptions elector_options;
    elector_options.leader_key = settings.leader_key.empty() ? std::string(nats::default_leader_key) : settings.leader_key;
    elector_options.election.startup_splay = std::chrono::milliseconds{0};
    elector_options.name = holder;
    const auto ttl = settings.leader_ttl.value_or(nats::default_leader_ttl);
    out.elector = std::make_shared<nats::Elector>(
        out.connection->bucket(
            nats::BucketConfig{.name = settings.leader_bucket, .ttl = ttl, .replicas = settings.nats_replicas}),
        elector_options);
  }
  if (settings.catch_up > std::chrono::nanoseconds::zero() || settings.history > 0) {
    auto config = nats::state_bucket_config(effective_fleet_bucket(settings));
    config.replicas = settings.nats_replicas;
    out.fleet_state = std::make_shared<nats::FleetState>(out.connection->bucket(config));
  }
  return out;
}

/// The rules of the NATS claimer (dedup window, key length) without a
/// connection, for `fleetcron validate`; every claim fails.
class OfflineNatsClaimer final : public Claimer {
 public:
  explicit OfflineNatsClaimer(const Settings& settings)
      : dedup_window_(nats::dedup_window_for(settings.claim_ttl, max_clock_skew(settings))) {}
  ClaimResult claim(std::string_view) override { return ClaimResult::failed("offline: no NATS connection"); }
  std::chrono::nanoseconds dedup_window() const override { return dedup_window_; }
  void check_entry_key(std::string_view key) const override { nats::Claimer::check_entry_key("", key); }

 private:
  std::chrono::nanoseconds dedup_window_;
};

}  // namespace

nats::ConnectionOptions parse_nats_uri(const std::string& uri, Settings& settings) {
  nats::UriOptions parsed = nats::parse_uri(uri);
  if (parsed.claim_bucket) settings.claim_bucket = *parsed.claim_bucket;
  if (parsed.leader_bucket) settings.leader_bucket = *parsed.leader_bucket;
  if (parsed.leader_key) settings.leader_key = *parsed.leader_key;
  if (parsed.replicas) settings.nats_replicas = *parsed.replicas;
  nats::ConnectionOptions& options = parsed.connection;
  if (!settings.coordinator_password.empty()) {
    // With a user in the URI it is that user's password, else a token.
    (options.user.empty() ? options.token : options.password) = settings.coordinator_password;
  }
  nats::validate(options);
  try {
    nats::check_key(settings.leader_key.empty() ? nats::default_leader_key : std::string_view(settings.leader_key));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("leader key ") + e.what());
  }
  if (settings.coordination != CoordinationMode::claim && settings.leader_ttl) {
    try {
      nats::check_election_ttl(*settings.leader_ttl);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("leader TTL {}: NATS leadership needs 10s .. 1h ({})",
                                              format_duration(*settings.leader_ttl), e.what()));
    }
  }
  return options;
}

postgres::UriOptions postgres_options(const Settings& settings) {
  postgres::UriOptions options = postgres::parse_uri(settings.coordinator);
  if (!settings.coordinator_password.empty()) options.connection.password = settings.coordinator_password;
  if (!settings.leader_key.empty()) options.leader_name = settings.leader_key;
  return options;
}

redis::ClientOptions redis_options(const Settings& settings) {
  redis::ClientOptions options = redis::parse_uri(settings.coordinator);
  if (!settings.coordinator_password.empty()) options.password = settings.coordinator_password;
  return options;
}

redis::ClaimerOptions redis_claimer_options(const Settings& settings) {
  return redis::ClaimerOptions{.claim_prefix = settings.claim_prefix, .claim_ttl = settings.claim_ttl,
                               .max_clock_skew = max_clock_skew(settings)};
}

nats::BucketConfig claim_bucket_config(const Settings& settings) {
  return nats::BucketConfig{.name = settings.claim_bucket, .ttl = settings.claim_ttl, .replicas = settings.nats_replicas};
}

std::shared_ptr<Claimer> make_offline_claimer(const Settings& given) {
  Settings settings = given;
  if (settings.coordination == CoordinationMode::leader) return nullptr;
  if (settings.coordinator == "memory") return std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
  if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
    (void)parse_nats_uri(settings.coordinator, settings);
    return std::make_shared<OfflineNatsClaimer>(settings);
  }
  if (postgres::is_postgres_uri(settings.coordinator)) {  // connects lazily: nothing touches the network
    const auto options = postgres_options(settings);
    return std::make_shared<postgres::Claimer>(
        std::make_shared<postgres::Connection>(options.connection),
        postgres::ClaimerOptions{.tables = options.tables, .claim_ttl = settings.claim_ttl,
                                 .max_clock_skew = max_clock_skew(settings)});
  }
  // Neither constructor touches the network.
  auto client = std::make_shared<redis::Client>(redis_options(settings));
  return std::make_shared<redis::Claimer>(
      client, redis::ClaimerOptions{.claim_prefix = settings.claim_prefix, .claim_ttl = settings.claim_ttl,
                                      .max_clock_skew = max_clock_skew(settings)});
}

std::vector<ReplicaSetting> dedup_settings(const Settings& settings) {
  const bool postgres = postgres::is_postgres_uri(settings.coordinator);
  const bool nats = !settings.coordinator.starts_with("redis") && settings.coordinator != "memory" && !postgres;
  std::optional<postgres::UriOptions> tables;
  if (postgres) tables = postgres_options(settings);
  std::vector<ReplicaSetting> out{{"mode", std::string(to_string(settings.coordination))}};
  if (settings.coordination != CoordinationMode::leader) {
    out.push_back({"claim_ttl", format_duration(settings.claim_ttl)});
    out.push_back({"max_clock_skew", format_duration(max_clock_skew(settings))});
    out.push_back(postgres ? ReplicaSetting{"claims_table", tables->tables.claims}
                  : nats   ? ReplicaSetting{"claim_bucket", settings.claim_bucket}
                           : ReplicaSetting{"claim_prefix", settings.claim_prefix});
  }
  if (settings.coordination != CoordinationMode::claim) {
    const auto ttl = settings.leader_ttl.value_or(nats ? nats::default_leader_ttl : redis::default_leader_ttl);
    if (postgres) {
      out.push_back({"leader_ttl", format_duration(ttl)});
      out.push_back({"leader_table", tables->tables.leader});
      out.push_back({"leader_key", tables->leader_name.value_or(std::string(postgres::default_leader_name))});
      return out;
    }
    const std::string_view key = nats ? nats::default_leader_key : redis::default_leader_key;
    out.push_back({"leader_ttl", format_duration(ttl)});
    out.push_back({"leader_key", settings.leader_key.empty() ? std::string(key) : settings.leader_key});
    if (nats) out.push_back({"leader_bucket", settings.leader_bucket});
  }
  return out;
}

namespace {

/// The claimer's last measured offset from the store's clock, in seconds.
template <typename MeasuringClaimer>
std::function<std::optional<double>()> offset_reader(std::shared_ptr<MeasuringClaimer> claimer) {
  return [claimer]() -> std::optional<double> {
    const auto offset = claimer->clock_offset();
    if (!offset) return std::nullopt;
    return std::chrono::duration<double>(offset->offset).count();
  };
}

/// PostgreSQL: its Claimer, Elector and fleet state on one pool.
void make_postgres(const Settings& settings, const std::string& holder, Coordination& out,
                   std::shared_ptr<Claimer>& claimer, std::shared_ptr<Elector>& elector) {
  const postgres::UriOptions options = postgres_options(settings);
  auto connection = std::make_shared<postgres::Connection>(options.connection);
  out.description = connection->describe();
  if (settings.coordination != CoordinationMode::leader) {
    auto pg_claimer = std::make_shared<postgres::Claimer>(
        connection, postgres::ClaimerOptions{.tables = options.tables, .claim_ttl = settings.claim_ttl,
                                             .max_clock_skew = max_clock_skew(settings)});
    claimer = pg_claimer;
    out.clock_offset = offset_reader(pg_claimer);
  }
  if (settings.coordination != CoordinationMode::claim) {
    elector = std::make_shared<postgres::Elector>(
        connection, postgres::ElectorOptions{.tables = options.tables,
                                             .leader_name = options.leader_name.value_or(
                                                 std::string(postgres::default_leader_name)),
                                             .lease = {.lease_ttl = settings.leader_ttl.value_or(
                                                           postgres::default_leader_ttl),
                                                       .keep_alive = true},
                                             .holder = holder});
  }
  const bool fleet_state = settings.catch_up > std::chrono::nanoseconds::zero() || settings.history > 0;
  if (fleet_state) {
    out.fleet_state = std::make_shared<postgres::FleetState>(connection, postgres::FleetStateOptions{.tables = options.tables});
  }
  out.schema_problems = [connection, tables = options.tables, fleet_state] {
    return postgres::missing_schema(*connection, tables, fleet_state);
  };
  out.ping = [connection] { connection->ping(); };
  out.resources = connection;
}

}  // namespace

namespace {

void make_memory(const Settings& settings, Coordination& out, std::shared_ptr<Claimer>& claimer,
                 std::shared_ptr<Elector>& elector) {
  out.description = "memory";
  if (settings.coordination != CoordinationMode::leader) {
    claimer = std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
  }
  if (settings.coordination != CoordinationMode::claim) {
    auto lease = std::make_shared<MemoryLease>(system_clock(), settings.leader_ttl.value_or(MemoryLease::default_lease_ttl));
    elector = lease->make_elector();
    out.resources = lease;
  }
  // In-process: the ledger, the controls and the registry for the API
  // and the status page; nothing survives the process.
  if (settings.history > 0 || settings.catch_up > std::chrono::nanoseconds::zero()) {
    out.fleet_state = std::make_shared<MemoryFleetState>(system_clock());
  }
  out.ping = [] {};
}

void make_redis(const Settings& settings, const std::string& holder, Coordination& out,
                std::shared_ptr<Claimer>& claimer, std::shared_ptr<Elector>& elector) {
  auto client = std::make_shared<redis::Client>(redis_options(settings));
  out.description = client->describe();
  if (client->options().tls && !client->options().tls_verify) {
    out.warnings.emplace_back("tls-unverified",
                              fmt::format("{}: TLS without verifying the server's certificate or name "
                                          "(tls_verify=false): anyone on the path can pose as the server",
                                          out.description));
  }
  if (settings.coordination != CoordinationMode::leader) {
    auto redis_claimer = std::make_shared<redis::Claimer>(client, redis_claimer_options(settings));
    claimer = redis_claimer;
    out.clock_offset = offset_reader(redis_claimer);
  }
  if (settings.coordination != CoordinationMode::claim) {
    redis::ElectorOptions options;
    if (!settings.leader_key.empty()) options.leader_key = settings.leader_key;
    options.lease.lease_ttl = settings.leader_ttl.value_or(redis::default_leader_ttl);
    options.lease.keep_alive = true;
    options.holder = holder;
    elector = std::make_shared<redis::Elector>(client, options);
  }
  if (settings.catch_up > std::chrono::nanoseconds::zero() || settings.history > 0) {
    out.fleet_state = std::make_shared<redis::FleetState>(
        client, redis::FleetStateOptions{.fleet_prefix = effective_fleet_prefix(settings)});
  }
  out.eviction_policy = [client] { return redis::read_eviction_policy(*client); };
  out.ping = [client] { client->ping(); };
  out.resources = client;
}

}  // namespace

Coordination make_coordination(const Settings& given, Metrics& metrics, const std::string& holder) {
  Settings settings = given;
  Coordination out;
  std::shared_ptr<Claimer> claimer;
  std::shared_ptr<Elector> elector;
  if (settings.coordinator == "memory") {
    make_memory(settings, out, claimer, elector);
  } else if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
    auto options = parse_nats_uri(settings.coordinator, settings);
    out.description = nats::describe(options);
    auto nats = std::make_shared<NatsCoordination>(make_nats(options, settings, holder));
    claimer = nats->claimer;
    if (nats->claimer) out.clock_offset = offset_reader(nats->claimer);
    elector = nats->elector;
    out.fleet_state = nats->fleet_state;
    out.ping = [nats] { nats->connection->ping(); };  // connects if need be
    out.resources = nats;
  } else if (postgres::is_postgres_uri(settings.coordinator)) {
    make_postgres(settings, holder, out, claimer, elector);
  } else {
    make_redis(settings, holder, out, claimer, elector);
  }
  if (claimer) out.claimer = std::make_shared<MeasuredClaimer>(claimer, metrics);
  if (elector) out.elector = std::make_shared<MeasuredElector>(elector, metrics);
  out.replica_settings = dedup_settings(settings);  // after the URI's query set the buckets
  return out;
}

}  // namespace fleetcron::daemon
