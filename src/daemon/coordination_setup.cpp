#include "daemon/coordination_setup.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "fleetcron/duration.h"
#include "fleetcron/memory_coordination.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/elector.h"

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

/// NATS: connects in the background until it succeeds; meanwhile claims
/// and elections fail closed with the connection error.
class NatsBackend : public std::enable_shared_from_this<NatsBackend> {
 public:
  NatsBackend(nats::ConnectionOptions options, const Settings& settings, LogSink& log)
      : options_(std::move(options)), settings_(settings), log_(log) {}
  ~NatsBackend() {
    {
      std::lock_guard guard(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (connector_.joinable()) connector_.join();
    // Elector before buckets and the connection (nats.c's teardown order).
    std::lock_guard guard(mutex_);
    if (elector_) elector_->resign();
    elector_.reset();
    claimer_.reset();
  }

  void start() {
    connector_ = std::thread([this] { connect_loop(); });
  }

  ClaimResult claim(std::string_view fire_key) {
    std::shared_ptr<nats::Claimer> claimer;
    std::string error;
    {
      std::lock_guard guard(mutex_);
      claimer = claimer_;
      error = error_;
    }
    if (!claimer) return ClaimResult::failed("NATS not connected: " + error);
    return claimer->claim(fire_key);
  }
  Leadership is_leader() {
    std::shared_ptr<nats::Elector> elector;
    std::string error;
    {
      std::lock_guard guard(mutex_);
      elector = elector_;
      error = error_;
    }
    if (!elector) return Leadership::failed("NATS not connected: " + error);
    return elector->is_leader();
  }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) {
    std::lock_guard guard(mutex_);
    lost_ = lost;
    if (elector_) elector_->on_leadership_lost(std::move(lost));
  }
  void set_liveness(std::function<bool()> alive) {
    std::lock_guard guard(mutex_);
    alive_ = alive;
    if (elector_) elector_->set_liveness(std::move(alive));
  }
  void resign() {
    std::shared_ptr<nats::Elector> elector;
    {
      std::lock_guard guard(mutex_);
      elector = elector_;
    }
    if (elector) elector->resign();
  }
  bool connected() {
    std::lock_guard guard(mutex_);
    return connection_ != nullptr && connection_->connected();
  }

 private:
  void connect_loop() {
    auto wait = std::chrono::milliseconds{500};
    while (true) {
      try {
        auto connection = nats::Connection::connect(options_);
        std::shared_ptr<nats::Claimer> claimer;
        std::shared_ptr<nats::Elector> elector;
        if (settings_.coordination != CoordinationMode::leader) {
          claimer = std::make_shared<nats::Claimer>(
              connection->bucket(nats::BucketConfig{.name = settings_.claim_bucket, .ttl = settings_.claim_ttl}),
              nats::ClaimerOptions{.max_clock_skew = max_clock_skew(settings_)});
        }
        if (settings_.coordination != CoordinationMode::claim) {
          nats::ElectorOptions options;
          options.key = settings_.leader_key.empty() ? "cron_leader" : settings_.leader_key;
          options.election.startup_splay = std::chrono::milliseconds{0};
          const auto ttl = settings_.leader_ttl.value_or(std::chrono::seconds{10});
          elector = std::make_shared<nats::Elector>(
              connection->bucket(nats::BucketConfig{.name = settings_.leader_bucket, .ttl = ttl}), options);
        }
        std::lock_guard guard(mutex_);
        if (elector && lost_) elector->on_leadership_lost(lost_);
        if (elector && alive_) elector->set_liveness(alive_);
        connection_ = std::move(connection);
        claimer_ = std::move(claimer);
        elector_ = std::move(elector);
        error_.clear();
        log_.write("info", "backend-connected", nats::describe(options_));
        return;
      } catch (const std::exception& e) {
        {
          std::lock_guard guard(mutex_);
          error_ = e.what();
        }
        log_.write("error", "backend-unreachable", fmt::format("{}; retrying in {}", e.what(), format_duration(wait)));
      }
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, wait, [this] { return stopping_; })) return;
      wait = std::min(wait * 2, std::chrono::milliseconds{10'000});
    }
  }

  nats::ConnectionOptions options_;
  Settings settings_;
  LogSink& log_;
  std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string error_ = "connecting";
  std::shared_ptr<nats::Connection> connection_;
  std::shared_ptr<nats::Claimer> claimer_;
  std::shared_ptr<nats::Elector> elector_;
  std::function<void(std::uint64_t)> lost_;
  std::function<bool()> alive_;
  std::thread connector_;
};

class NatsClaimerAdapter final : public Claimer {
 public:
  NatsClaimerAdapter(std::shared_ptr<NatsBackend> backend, const Settings& settings)
      : backend_(std::move(backend)), dedup_window_(settings.claim_ttl - 2 * max_clock_skew(settings)) {}
  ClaimResult claim(std::string_view fire_key) override {
    if (!backend_) return ClaimResult::failed("offline: no NATS connection");
    return backend_->claim(fire_key);
  }
  // As nats::Claimer's (the bucket's TTL is claim_ttl; the claimer itself
  // may not exist yet while the connection is being made).
  std::chrono::nanoseconds dedup_window() const override { return dedup_window_; }
  void check_entry_key(std::string_view key) const override { nats::Claimer::check_entry_key("", key); }

 private:
  std::shared_ptr<NatsBackend> backend_;
  std::chrono::nanoseconds dedup_window_;
};

class NatsElectorAdapter final : public Elector {
 public:
  explicit NatsElectorAdapter(std::shared_ptr<NatsBackend> backend) : backend_(std::move(backend)) {}
  Leadership is_leader() override { return backend_->is_leader(); }
  void on_leadership_lost(std::function<void(std::uint64_t)> lost) override { backend_->on_leadership_lost(std::move(lost)); }
  void resign() override { backend_->resign(); }
  void set_liveness(std::function<bool()> alive) override { backend_->set_liveness(std::move(alive)); }

 private:
  std::shared_ptr<NatsBackend> backend_;
};

}  // namespace

/// nats://[user:password@]host:port[,host:port…][?bucket=…&leader_bucket=…&key=…]
nats::ConnectionOptions parse_nats_uri(const std::string& uri, Settings& settings) {
  nats::ConnectionOptions options;
  options.servers.clear();
  const std::string scheme = uri.substr(0, uri.find("://") + 3);
  std::string hosts = uri.substr(scheme.size());
  // Userinfo first, up to the last '@' (no bucket, key or host has one):
  // a password with an unescaped '?', '/' or ',' stays whole and secret
  // instead of leaking into the host list or the options.
  const auto at = hosts.rfind('@');
  std::optional<std::string> userinfo_text;
  if (at != std::string::npos) {
    userinfo_text = hosts.substr(0, at);
    hosts = hosts.substr(at + 1);
  }
  std::string query;
  if (const auto query_at = hosts.find('?'); query_at != std::string::npos) {
    query = hosts.substr(query_at + 1);
    hosts.resize(query_at);
  }
  if (userinfo_text) {
    const std::string& userinfo = *userinfo_text;
    const auto colon = userinfo.find(':');
    if (colon == std::string::npos) {
      options.token = userinfo;
    } else {
      options.user = userinfo.substr(0, colon);
      options.password = userinfo.substr(colon + 1);
    }
  }
  std::size_t start = 0;
  while (start <= hosts.size()) {
    const auto comma = std::min(hosts.find(',', start), hosts.size());
    const std::string host = hosts.substr(start, comma - start);
    if (host.empty()) throw std::invalid_argument(fmt::format("coordinator {}: an empty server address", nats::describe(options)));
    options.servers.push_back(scheme + host);
    start = comma + 1;
  }
  start = 0;
  while (!query.empty() && start <= query.size()) {
    const auto amp = std::min(query.find('&', start), query.size());
    const std::string pair = query.substr(start, amp - start);
    const auto equals = pair.find('=');
    const std::string name = pair.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : pair.substr(equals + 1);
    if (value.empty()) throw std::invalid_argument(fmt::format("coordinator URI option {} needs a value", name));
    if (name == "bucket") {
      settings.claim_bucket = value;
    } else if (name == "leader_bucket") {
      settings.leader_bucket = value;
    } else if (name == "key") {
      settings.leader_key = value;
    } else {
      throw std::invalid_argument(fmt::format("coordinator URI: unknown option \"{}\" (known: bucket, leader_bucket, key)", name));
    }
    start = amp + 1;
  }
  if (!settings.coordinator_password.empty()) {
    // With a user in the URI it is that user's password, else a token.
    (options.user.empty() ? options.token : options.password) = settings.coordinator_password;
  }
  nats::validate(options);
  const std::string key = settings.leader_key.empty() ? "cron_leader" : settings.leader_key;
  const bool key_ok = !key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos &&
                      key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/=.") ==
                          std::string::npos;
  if (!key_ok) {
    throw std::invalid_argument(fmt::format("leader key \"{}\" is not a valid NATS key (letters, digits, _ - / = .)", key));
  }
  if (settings.coordination != CoordinationMode::claim && settings.leader_ttl &&
      (*settings.leader_ttl < std::chrono::seconds{10} || *settings.leader_ttl > std::chrono::hours{1})) {
    throw std::invalid_argument(fmt::format("leader TTL {}: NATS leadership needs 10s .. 1h (the election's bucket TTL)",
                                            format_duration(*settings.leader_ttl)));
  }
  return options;
}

redis::ClientOptions redis_options(const Settings& settings) {
  redis::ClientOptions options = redis::parse_uri(settings.coordinator);
  if (!settings.coordinator_password.empty()) options.password = settings.coordinator_password;
  return options;
}

std::shared_ptr<Claimer> make_offline_claimer(const Settings& given) {
  Settings settings = given;
  if (settings.coordination == CoordinationMode::leader) return nullptr;
  if (settings.coordinator == "memory") return std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
  if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
    (void)parse_nats_uri(settings.coordinator, settings);
    return std::make_shared<NatsClaimerAdapter>(nullptr, settings);
  }
  // Neither constructor touches the network.
  auto client = std::make_shared<redis::Client>(redis_options(settings));
  return std::make_shared<redis::Claimer>(
      client, redis::ClaimerOptions{.claim_prefix = settings.claim_prefix, .claim_ttl = settings.claim_ttl,
                                      .max_clock_skew = max_clock_skew(settings)});
}

Coordination make_coordination(const Settings& given, Metrics& metrics, LogSink& log) {
  Settings settings = given;
  Coordination out;
  const bool claims = settings.coordination != CoordinationMode::leader;
  const bool leadership = settings.coordination != CoordinationMode::claim;
  std::shared_ptr<Claimer> claimer;
  std::shared_ptr<Elector> elector;
  if (settings.coordinator == "memory") {
    out.description = "memory";
    if (claims) claimer = std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
    if (leadership) {
      auto lease = std::make_shared<MemoryLease>(system_clock(), settings.leader_ttl.value_or(std::chrono::seconds{30}));
      elector = lease->make_elector();
      out.resources = lease;
    }
    out.reachable = [] { return true; };
  } else if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
    auto options = parse_nats_uri(settings.coordinator, settings);
    out.description = nats::describe(options);
    auto backend = std::make_shared<NatsBackend>(options, settings, log);
    backend->start();
    if (claims) claimer = std::make_shared<NatsClaimerAdapter>(backend, settings);
    if (leadership) elector = std::make_shared<NatsElectorAdapter>(backend);
    out.reachable = [backend] { return backend->connected(); };
    out.resources = backend;
  } else {
    auto client = std::make_shared<redis::Client>(redis_options(settings));
    out.description = client->describe();
    std::shared_ptr<redis::Claimer> redis_claimer;
    if (claims) {
      redis_claimer = std::make_shared<redis::Claimer>(
          client, redis::ClaimerOptions{.claim_prefix = settings.claim_prefix, .claim_ttl = settings.claim_ttl,
                                      .max_clock_skew = max_clock_skew(settings)});
      claimer = redis_claimer;
      out.clock_offset = [redis_claimer]() -> std::optional<double> {
        const auto offset = redis_claimer->clock_offset();
        if (!offset) return std::nullopt;
        return std::chrono::duration<double>(offset->offset).count();
      };
    }
    if (leadership) {
      redis::ElectorOptions options;
      if (!settings.leader_key.empty()) options.leader_key = settings.leader_key;
      options.lease_ttl = settings.leader_ttl.value_or(redis::default_leader_ttl);
      options.keep_alive = true;
      elector = std::make_shared<redis::Elector>(client, options);
    }
    out.eviction_policy = [client] { return redis::read_eviction_policy(*client); };
    out.reachable = [client] {
      try {
        client->ping();
        return true;
      } catch (const std::exception&) {
        return false;
      }
    };
    out.resources = client;
  }
  if (claimer) out.claimer = std::make_shared<MeasuredClaimer>(claimer, metrics);
  if (elector) out.elector = std::make_shared<MeasuredElector>(elector, metrics);
  return out;
}

}  // namespace fleetcron::daemon
