// The coordination contract for NATS JetStream KV, on real nats-server
// processes.
#include "conformance/coordination_contract.h"

#include <atomic>

#include "fleetcron/nats/connection.h"
#include "fleetcron/nats/coordination.h"
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
// The fleet-state contract is linked in too; it is instantiated here when
// nats::FleetState lands (docs/fleet-state.md, implementation order).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FleetStateContract);

}  // namespace
}  // namespace fleetcron::test
