// NATS JetStream KV: claims, the lease and the fleet state in buckets on
// one lazy connection (they fail closed until the server answers).
#include "daemon/backends/nats_backend.h"

#include <fmt/format.h>

#include <ostream>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "fleetcron/nats/build_info.h"
#include "fleetcron/duration.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/nats/diagnostics.h"
#include "fleetcron/nats/elector.h"
#include "fleetcron/nats/fleet_state.h"
#include "fleetcron/nats/uri.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

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

std::string describe_leader_record(const std::optional<nats::Entry>& entry) {
  if (!entry || entry->operation != nats::Entry::Operation::put || entry->value == nats::Election::resigned_marker) {
    return "leader: none\n";
  }
  // The term is the revision at which it won; the key only keeps its
  // latest renewal, so that is what can be shown here. The value is
  // whatever was written to the bucket: escaped, so it cannot forge lines
  // or send terminal control sequences.
  return fmt::format("leader: \"{}\" (last renewed at revision {})\n", terminal_safe(entry->value), entry->revision);
}

namespace {

nats::BucketConfig claim_bucket_config(const Settings& settings) {
  return nats::BucketConfig{.name = settings.claim_bucket, .ttl = settings.claim_ttl, .replicas = settings.nats_replicas};
}

std::string leader_key(const Settings& settings) {
  return settings.leader_key.empty() ? std::string(nats::default_leader_key) : settings.leader_key;
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

class NatsBackend final : public Backend {
 public:
  std::string_view name() const override { return "NATS"; }
  std::string_view forms() const override { return "nats://…, tls://…"; }
  std::string build_info() const override { return nats::build_info(); }
  bool accepts(std::string_view coordinator) const override {
    return coordinator.starts_with("nats://") || coordinator.starts_with("tls://");
  }
  std::string_view password_variable() const override { return "FLEETCRON_NATS_PASSWORD"; }

  Coordination connect(const Settings& given, const std::string& holder) const override;

  std::shared_ptr<Claimer> offline_claimer(const Settings& given) const override {
    if (given.coordination == CoordinationMode::leader) return nullptr;
    Settings settings = given;
    (void)parse_nats_uri(settings.coordinator, settings);
    return std::make_shared<OfflineNatsClaimer>(settings);
  }

  StoreView read_view(const Settings& given, bool) const override {
    Settings settings = given;
    nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
    options.max_reconnects = 0;
    auto connection = nats::Connection::connect(options);
    StoreView view{connection->describe(), {}, {}};
    std::shared_ptr<nats::Bucket> leader_bucket;
    try {
      leader_bucket = connection->bucket(settings.leader_bucket);
    } catch (const BackendError&) {
      view.text = fmt::format("leader: none (no bucket {})\n", settings.leader_bucket);
      return view;
    }
    const auto entry = leader_bucket->get(leader_key(settings));
    view.text = describe_leader_record(entry);
    if (entry && entry->operation == nats::Entry::Operation::put && entry->value != nats::Election::resigned_marker) {
      view.leader = {entry->value, std::nullopt, std::nullopt, entry->revision};
    }
    return view;
  }

  std::shared_ptr<FleetState> open_fleet_state(const Settings& given) const override {
    Settings settings = given;  // parsing the URI fills it in
    const auto options = parse_nats_uri(settings.coordinator, settings);
    auto connection = nats::Connection::connect(options);
    return std::make_shared<nats::FleetState>(connection->bucket(effective_fleet_bucket(settings)));
  }

  int init(const Settings& given, std::ostream& out, std::ostream&) const override {
    Settings settings = given;
    const nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
    const auto connection = nats::Connection::connect(options);
    const auto bucket = connection->bucket(claim_bucket_config(settings));
    const auto created = bucket->stream_times().stream_created;
    const Instant at{std::chrono::duration_cast<Instant::duration>(created.time_since_epoch())};
    const Instant ready = at + std::chrono::duration_cast<Instant::duration>(max_clock_skew(settings));
    out << fmt::format("init: {}: claims bucket {} created {}; fires scheduled from {} on (its creation + "
                       "max_clock_skew {}) are claimed, earlier ones are refused as before a reset: start the "
                       "replicas after that\n",
                       connection->describe(), bucket->name(), format_rfc3339(at), format_rfc3339(ready),
                       format_duration(max_clock_skew(settings)));
    return 0;
  }

 protected:
  // The URI's query may name the buckets and the key: read it first.
  std::optional<ReplicaSetting> claim_place(const Settings& given) const override {
    Settings settings = given;
    (void)parse_nats_uri(settings.coordinator, settings);
    return ReplicaSetting{"claim_bucket", settings.claim_bucket};
  }
  std::chrono::nanoseconds default_leader_ttl() const override { return nats::default_leader_ttl; }
  std::vector<ReplicaSetting> lease_place(const Settings& given) const override {
    Settings settings = given;
    (void)parse_nats_uri(settings.coordinator, settings);
    return {{"leader_key", leader_key(settings)}, {"leader_bucket", settings.leader_bucket}};
  }
};

Coordination NatsBackend::connect(const Settings& given, const std::string& holder) const {
  Settings settings = given;
  const nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
  Coordination out;
  out.description = nats::describe(options);
  auto connection = nats::Connection::connect(options);
  std::shared_ptr<nats::Claimer> claimer;
  if (settings.coordination != CoordinationMode::leader) {
    claimer = std::make_shared<nats::Claimer>(connection->bucket(claim_bucket_config(settings)),
                                              nats::ClaimerOptions{.max_clock_skew = max_clock_skew(settings)});
    out.claimer = claimer;
  }
  if (settings.coordination != CoordinationMode::claim) {
    nats::ElectorOptions elector_options;
    elector_options.leader_key = leader_key(settings);
    elector_options.election.startup_splay = std::chrono::milliseconds{0};
    elector_options.name = holder;
    const auto ttl = settings.leader_ttl.value_or(nats::default_leader_ttl);
    out.elector = std::make_shared<nats::Elector>(
        connection->bucket(nats::BucketConfig{.name = settings.leader_bucket, .ttl = ttl, .replicas = settings.nats_replicas}),
        elector_options);
  }
  if (keeps_fleet_state(settings)) {
    auto config = nats::state_bucket_config(effective_fleet_bucket(settings));
    config.replicas = settings.nats_replicas;
    out.fleet_state = std::make_shared<nats::FleetState>(connection->bucket(config));
  }
  out.diagnostics = nats::make_diagnostics(connection, std::move(claimer));
  out.resources = connection;
  return out;
}

}  // namespace

const Backend& nats_backend() {
  static const NatsBackend backend;
  return backend;
}

}  // namespace fleetcron::daemon
