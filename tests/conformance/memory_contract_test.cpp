// The coordination contract for the in-memory backends (one process).
#include "conformance/coordination_contract.h"

#include "fleetcron/clock.h"
#include "fleetcron/memory_coordination.h"
#include "support/time.h"

namespace fleetcron::test {
namespace {

using namespace std::chrono_literals;

class MemoryFleet final : public ContractFleet {
 public:
  MemoryFleet()
      : clock_(std::make_shared<VirtualClock>(real_now())),
        claims_(std::make_shared<MemoryClaimer>(clock_, claim_ttl_)),
        lease_(std::make_shared<MemoryLease>(clock_, lease_ttl_)) {}
  // One MemoryClaimer is the store: every replica shares it.
  std::shared_ptr<Claimer> claimer() override { return claims_; }
  std::shared_ptr<Elector> elector() override { return lease_->make_elector(); }
  std::chrono::nanoseconds claim_ttl() const override { return claim_ttl_; }
  void end_lease() override { clock_->advance(lease_ttl_ + 1ms); }
  void lose_store() override { ADD_FAILURE() << "the memory backend has no store to lose"; }
  std::chrono::milliseconds handover_bound() const override { return 1000ms; }  // is_leader() decides at once

 private:
  static constexpr std::chrono::nanoseconds claim_ttl_ = std::chrono::minutes{10};
  static constexpr std::chrono::nanoseconds lease_ttl_ = std::chrono::seconds{30};
  std::shared_ptr<VirtualClock> clock_;
  std::shared_ptr<MemoryClaimer> claims_;
  std::shared_ptr<MemoryLease> lease_;
};

INSTANTIATE_TEST_SUITE_P(Memory, CoordinationContract,
                         ::testing::Values(ContractBackend{"memory", [](bool) { return std::make_unique<MemoryFleet>(); }}),
                         [](const auto& test) { return test.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StoreLossContract);  // memory has no store to lose

}  // namespace
}  // namespace fleetcron::test
