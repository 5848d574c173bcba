// The coordination and fleet-state contracts for PostgreSQL, on real
// clusters (the shared one, and private ones for store loss).
#include <thread>

#include "conformance/coordination_contract.h"
#include "conformance/fleet_state_contract.h"
#include "fleetcron/postgres/claimer.h"
#include "fleetcron/postgres/elector.h"
#include "fleetcron/postgres/fleet_state.h"
#include "fleetcron/postgres/uri.h"
#include "postgres_server.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<postgres::Connection> connect(const std::string& uri) {
  postgres::ConnectionOptions options = postgres::parse_uri(uri).connection;
  options.statement_timeout = 1000ms;
  options.connect_timeout = 1000ms;
  return std::make_shared<postgres::Connection>(options);
}

class PostgresFleet final : public ContractFleet {
 public:
  explicit PostgresFleet(bool private_store)
      : server_(private_store ? std::make_unique<PostgresServer>() : nullptr),
        uri_(server_ ? server_->uri() : shared_postgres_uri()),
        tables_(unique_tables()) {
    auto connection = connect(uri_);
    (void)postgres::migrate(*connection, tables_);
  }
  std::shared_ptr<Claimer> claimer() override {
    return std::make_shared<postgres::Claimer>(connect(uri_),
                                               postgres::ClaimerOptions{.tables = tables_, .claim_ttl = claim_ttl()});
  }
  std::shared_ptr<Elector> elector() override {
    return std::make_shared<postgres::Elector>(connect(uri_),
                                               postgres::ElectorOptions{.tables = tables_, .lease = {.lease_ttl = 2s}});
  }
  std::chrono::nanoseconds claim_ttl() const override { return postgres::default_claim_ttl; }
  void end_lease() override { (void)psql(uri_, "DELETE FROM " + tables_.leader); }
  void lose_store() override { server_->stop(); }
  std::chrono::milliseconds handover_bound() const override { return 5000ms; }

 private:
  std::unique_ptr<PostgresServer> server_;
  std::string uri_;
  postgres::TableNames tables_;
};

const ContractBackend postgres_backend{
    "postgres", [](bool private_store) { return std::make_unique<PostgresFleet>(private_store); }};

INSTANTIATE_TEST_SUITE_P(Postgres, CoordinationContract, ::testing::Values(postgres_backend),
                         [](const auto& test) { return test.param.name; });
INSTANTIATE_TEST_SUITE_P(Postgres, StoreLossContract, ::testing::Values(postgres_backend),
                         [](const auto& test) { return test.param.name; });

// Replicas of one fleet: each its own connection, one set of tables.
// Expiry is the server's now(), so the test waits real time for it.
class PostgresStateFleet final : public FleetStateFleet {
 public:
  PostgresStateFleet() : tables_(unique_tables()) { (void)postgres::migrate(*connect(shared_postgres_uri()), tables_); }
  std::shared_ptr<FleetState> replica() override {
    return std::make_shared<postgres::FleetState>(connect(shared_postgres_uri()),
                                                  postgres::FleetStateOptions{.tables = tables_});
  }
  std::chrono::nanoseconds short_keep_for() const override { return 3s; }
  void let_pass(std::chrono::nanoseconds duration) override { std::this_thread::sleep_for(duration); }

 private:
  postgres::TableNames tables_;
};

const FleetStateBackend postgres_state_backend{"postgres", [] { return std::make_unique<PostgresStateFleet>(); }};

INSTANTIATE_TEST_SUITE_P(Postgres, FleetStateContract, ::testing::Values(postgres_state_backend),
                         [](const auto& test) { return test.param.name; });

}  // namespace
}  // namespace fleetcron::test
