// The coordination and fleet-state contracts for Redis, on real
// redis-server processes.
#include <thread>

#include "conformance/coordination_contract.h"
#include "conformance/fleet_state_contract.h"

#include "fleetcron/redis/claimer.h"
#include "fleetcron/redis/client.h"
#include "fleetcron/redis/elector.h"
#include "fleetcron/redis/fleet_state.h"
#include "redis/commands.h"
#include "redis_server.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

class RedisFleet final : public ContractFleet {
 public:
  explicit RedisFleet(bool private_store)
      : server_(private_store ? std::make_unique<RedisServer>() : nullptr),
        uri_(server_ ? server_->uri() : shared_redis_uri()),
        prefix_(unique_prefix()) {}
  std::shared_ptr<Claimer> claimer() override {
    return std::make_shared<redis::Claimer>(client(), redis::ClaimerOptions{.claim_prefix = prefix_ + "claim:"});
  }
  std::shared_ptr<Elector> elector() override {
    return std::make_shared<redis::Elector>(client(), redis::ElectorOptions{.leader_key = prefix_ + "leader",
                                                                            .lease = {.lease_ttl = lease_ttl_}});
  }
  std::chrono::nanoseconds claim_ttl() const override { return redis::ClaimerOptions{}.claim_ttl; }
  void end_lease() override { (void)client()->impl().command({"DEL", prefix_ + "leader"}); }
  void lose_store() override { server_->stop(); }
  std::chrono::milliseconds handover_bound() const override { return 5000ms; }

 private:
  std::shared_ptr<redis::Client> client() const {
    redis::ClientOptions base;
    base.request_timeout = 1000ms;
    base.connect_timeout = 1000ms;
    return std::make_shared<redis::Client>(redis::parse_uri(uri_, base).connection);
  }
  static constexpr std::chrono::nanoseconds lease_ttl_ = std::chrono::seconds{2};
  std::unique_ptr<RedisServer> server_;
  std::string uri_;
  std::string prefix_;
};

const ContractBackend redis_backend{"redis", [](bool private_store) { return std::make_unique<RedisFleet>(private_store); }};

INSTANTIATE_TEST_SUITE_P(Redis, CoordinationContract, ::testing::Values(redis_backend),
                         [](const auto& test) { return test.param.name; });
INSTANTIATE_TEST_SUITE_P(Redis, StoreLossContract, ::testing::Values(redis_backend),
                         [](const auto& test) { return test.param.name; });

// Replicas of one fleet: each its own client, one fleet prefix. Expiry is
// the server's (PX), so the test waits real time for it.
class RedisStateFleet final : public FleetStateFleet {
 public:
  RedisStateFleet() : prefix_(unique_prefix() + "fleet:") {}
  std::shared_ptr<FleetState> replica() override {
    auto client = std::make_shared<redis::Client>(redis::parse_uri(shared_redis_uri()).connection);
    return std::make_shared<redis::FleetState>(client, redis::FleetStateOptions{.fleet_prefix = prefix_});
  }
  std::chrono::nanoseconds short_keep_for() const override { return 3s; }  // margins of 750 ms around the expiry
  void let_pass(std::chrono::nanoseconds duration) override { std::this_thread::sleep_for(duration); }
  std::chrono::nanoseconds ledger_life_beyond(std::chrono::nanoseconds keep_for) const override {
    return redis::FleetState::ledger_life_refresh(keep_for);
  }

 private:
  std::string prefix_;
};

const FleetStateBackend redis_state_backend{"redis", [] { return std::make_unique<RedisStateFleet>(); }};

INSTANTIATE_TEST_SUITE_P(Redis, FleetStateContract, ::testing::Values(redis_state_backend),
                         [](const auto& test) { return test.param.name; });

}  // namespace
}  // namespace fleetcron::test
