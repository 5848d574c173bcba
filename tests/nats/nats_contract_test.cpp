// The coordination contract for NATS JetStream KV, on real nats-server
// processes.
#include "conformance/coordination_contract.h"
#include "conformance/fleet_state_contract.h"

#include <atomic>
#include <thread>

#include "fleetcron/nats/connection.h"
#include "fleetcron/nats/coordination.h"
#include "fleetcron/nats/fleet_state.h"
#include "nats_server.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

class NatsFleet final : public ContractFleet {
 public:
  explicit NatsFleet(bool private_store)
      : server_(private_store ? std::make_unique<NatsServer>() : nullptr),
        connection_(nats::Connection::connect(nats::ConnectionOptions{.servers = {server_ ? server_->url()
                                                                                          : shared_nats_url()}})),
        claims_(connection_->bucket(nats::BucketConfig{.name = unique_bucket(), .ttl = claim_ttl_})),
        leases_(connection_->bucket(nats::BucketConfig{.name = unique_bucket(), .ttl = lease_ttl_})) {}
  std::shared_ptr<Claimer> claimer() override { return std::make_shared<nats::Claimer>(claims_); }
  std::shared_ptr<Elector> elector() override {
    nats::ElectorOptions options;
    options.name = "replica-" + std::to_string(next_replica_++);  // unique among the candidates
    options.election.startup_splay = 0ms;
    options.election.validate_ttl = false;  // a short TTL, so handovers fit a test
    return std::make_shared<nats::Elector>(leases_, options);
  }
  std::chrono::nanoseconds claim_ttl() const override { return claim_ttl_; }
  void end_lease() override { leases_->remove(nats::default_leader_key); }
  void lose_store() override { server_->stop(); }
  std::chrono::milliseconds handover_bound() const override { return 5000ms; }

 private:
  static constexpr std::chrono::nanoseconds claim_ttl_ = std::chrono::minutes{10};
  static constexpr std::chrono::nanoseconds lease_ttl_ = std::chrono::milliseconds{750};
  std::unique_ptr<NatsServer> server_;
  std::shared_ptr<nats::Connection> connection_;
  std::shared_ptr<nats::Bucket> claims_;
  std::shared_ptr<nats::Bucket> leases_;
  std::atomic<int> next_replica_{0};
};

const ContractBackend nats_backend{"nats", [](bool private_store) { return std::make_unique<NatsFleet>(private_store); }};

INSTANTIATE_TEST_SUITE_P(Nats, CoordinationContract, ::testing::Values(nats_backend),
                         [](const auto& test) { return test.param.name; });
INSTANTIATE_TEST_SUITE_P(Nats, StoreLossContract, ::testing::Values(nats_backend),
                         [](const auto& test) { return test.param.name; });
// Replicas of one fleet: one connection (as NatsFleet; a second one costs
// nats.c's 2 s shutdown wait per test), one state bucket with the
// production TTL; the expiry tests get a bucket whose TTL is
// short_keep_for (a KV bucket has one TTL). Expiry is the server's: real
// time passes.
class NatsStateFleet final : public FleetStateFleet {
 public:
  NatsStateFleet()
      : connection_(nats::Connection::connect(nats::ConnectionOptions{.servers = {shared_nats_url()}})),
        bucket_(unique_bucket()),
        short_bucket_(unique_bucket()) {}
  std::shared_ptr<FleetState> replica() override {
    return std::make_shared<nats::FleetState>(connection_->bucket(nats::state_bucket_config(bucket_)));
  }
  std::shared_ptr<FleetState> replica_for_expiry() override {
    return std::make_shared<nats::FleetState>(
        connection_->bucket(nats::BucketConfig{.name = short_bucket_, .ttl = short_keep_for()}));
  }
  std::chrono::nanoseconds short_keep_for() const override { return 3s; }
  void let_pass(std::chrono::nanoseconds duration) override { std::this_thread::sleep_for(duration); }

 private:
  std::shared_ptr<nats::Connection> connection_;
  std::string bucket_;
  std::string short_bucket_;
};

const FleetStateBackend nats_state_backend{"nats", [] { return std::make_unique<NatsStateFleet>(); }};

INSTANTIATE_TEST_SUITE_P(Nats, FleetStateContract, ::testing::Values(nats_state_backend),
                         [](const auto& test) { return test.param.name; });

}  // namespace
}  // namespace fleetcron::test
