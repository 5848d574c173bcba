// PostgreSQL: claims, the lease and the fleet state in tables on one pool.
// The daemon never runs DDL: `fleetcron migrate` creates the tables, and
// the start refuses a schema that lacks them.
#include <fmt/format.h>

#include <ostream>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "fleetcron/postgres/build_info.h"
#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/diagnostics.h"
#include "fleetcron/postgres/elector.h"
#include "fleetcron/postgres/fleet_state.h"
#include "fleetcron/postgres/schema.h"
#include "fleetcron/postgres/uri.h"

namespace fleetcron::daemon {

namespace {

/// The coordinator URI's options: Settings::coordinator_password the
/// password, Settings::leader_key the election name. Throws UriError.
postgres::UriOptions uri_options(const Settings& settings) {
  postgres::UriOptions options = postgres::parse_uri(settings.coordinator);
  if (!settings.coordinator_password.empty()) options.connection.password = settings.coordinator_password;
  if (!settings.leader_key.empty()) options.leader_name = settings.leader_key;
  return options;
}

std::string leader_name(const postgres::UriOptions& options) {
  return options.leader_name.value_or(std::string(postgres::default_leader_name));
}

std::shared_ptr<postgres::Claimer> make_claimer(std::shared_ptr<postgres::Connection> connection,
                                                const postgres::UriOptions& options, const Settings& settings) {
  return std::make_shared<postgres::Claimer>(
      std::move(connection), postgres::ClaimerOptions{.tables = options.tables, .claim_ttl = settings.claim_ttl,
                                                      .max_clock_skew = max_clock_skew(settings)});
}

class PostgresBackend final : public Backend {
 public:
  std::string_view name() const override { return "PostgreSQL"; }
  std::string_view forms() const override { return "postgres://…, postgresql://…"; }
  std::string build_info() const override { return postgres::build_info(); }
  bool accepts(std::string_view coordinator) const override { return postgres::is_postgres_uri(coordinator); }
  std::string_view password_variable() const override { return "FLEETCRON_POSTGRES_PASSWORD"; }

  Coordination connect(const Settings& settings, const std::string& holder) const override {
    const postgres::UriOptions options = uri_options(settings);
    auto connection = std::make_shared<postgres::Connection>(options.connection);
    Coordination out;
    out.description = connection->describe();
    std::shared_ptr<postgres::Claimer> claimer;
    if (settings.coordination != CoordinationMode::leader) {
      claimer = make_claimer(connection, options, settings);
      out.claimer = claimer;
    }
    if (settings.coordination != CoordinationMode::claim) {
      out.elector = std::make_shared<postgres::Elector>(
          connection, postgres::ElectorOptions{.tables = options.tables,
                                               .leader_name = leader_name(options),
                                               .lease = {.lease_ttl = settings.leader_ttl.value_or(
                                                             postgres::default_leader_ttl),
                                                         .keep_alive = true},
                                               .holder = holder});
    }
    const bool fleet_state = keeps_fleet_state(settings);
    if (fleet_state) {
      out.fleet_state =
          std::make_shared<postgres::FleetState>(connection, postgres::FleetStateOptions{.tables = options.tables});
    }
    out.diagnostics = postgres::make_diagnostics(connection, options.tables, fleet_state, std::move(claimer));
    out.resources = connection;
    return out;
  }

  // Connects lazily: nothing touches the network.
  std::shared_ptr<Claimer> offline_claimer(const Settings& settings) const override {
    if (settings.coordination == CoordinationMode::leader) return nullptr;
    const postgres::UriOptions options = uri_options(settings);
    return make_claimer(std::make_shared<postgres::Connection>(options.connection), options, settings);
  }

  StoreView read_view(const Settings& settings, bool) const override try {
    const postgres::UriOptions options = uri_options(settings);
    postgres::Connection connection(options.connection);
    StoreView view{connection.describe(), {}, {}};
    const auto row = postgres::read_leader(connection, options.tables, leader_name(options));
    if (!row) {
      view.text = "leader: none\n";
      return view;
    }
    view.leader = {row->holder, std::to_string(row->term), row->expires_in.count(), std::nullopt};
    view.text = fmt::format("leader: \"{}\" (term {}, lease expires in {} ms)\n", terminal_safe(row->holder), row->term,
                            row->expires_in.count());
    return view;
  } catch (const BackendError& e) {
    throw std::runtime_error(terminal_safe(e.what()));
  }

  std::shared_ptr<FleetState> open_fleet_state(const Settings& settings) const override {
    const postgres::UriOptions options = uri_options(settings);
    return std::make_shared<postgres::FleetState>(std::make_shared<postgres::Connection>(options.connection),
                                                  postgres::FleetStateOptions{.tables = options.tables});
  }

  int init(const Settings& settings, std::ostream& out, std::ostream& err) const override {
    out << "init: PostgreSQL: `fleetcron migrate` creates the tables; on new ones it declares the store new\n";
    return run_migrate_command(settings, out, err);  // its errors named as migrate's
  }

  int migrate(const Settings& settings, std::ostream& out, std::ostream&) const override {
    const postgres::UriOptions options = uri_options(settings);
    postgres::Connection connection(options.connection);
    out << "migrate: " << connection.describe() << '\n';
    for (const std::string& line : postgres::migrate(connection, options.tables)) out << "  " << line << '\n';
    return 0;
  }

 protected:
  std::optional<ReplicaSetting> claim_place(const Settings& settings) const override {
    return ReplicaSetting{"claims_table", uri_options(settings).tables.claims};
  }
  std::chrono::nanoseconds default_leader_ttl() const override { return postgres::default_leader_ttl; }
  std::vector<ReplicaSetting> lease_place(const Settings& settings) const override {
    const postgres::UriOptions options = uri_options(settings);
    return {{"leader_table", options.tables.leader}, {"leader_key", leader_name(options)}};
  }
};

}  // namespace

const Backend& postgres_backend() {
  static const PostgresBackend backend;
  return backend;
}

}  // namespace fleetcron::daemon
