#include "fleetcron/redis/diagnostics.h"

#include <stdexcept>

#include "fleetcron/redis/eviction_policy.h"

namespace fleetcron::redis {

namespace {

class RedisDiagnostics final : public fleetcron::Diagnostics {
 public:
  RedisDiagnostics(std::shared_ptr<Client> client, std::shared_ptr<Claimer> claimer)
      : client_(std::move(client)), claimer_(std::move(claimer)) {}
  void ping() override { client_->ping(); }
  std::optional<ClockOffset> clock_offset() override { return claimer_ ? claimer_->clock_offset() : std::nullopt; }
  std::optional<StoreConfig> check_config() override {
    const EvictionPolicy policy = read_eviction_policy(*client_);
    return StoreConfig{policy.answered, policy.safe(), policy.policy, policy.describe()};
  }

 private:
  std::shared_ptr<Client> client_;
  std::shared_ptr<Claimer> claimer_;
};

}  // namespace

std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(std::shared_ptr<Client> client, std::shared_ptr<Claimer> claimer) {
  if (!client) throw std::invalid_argument("redis::make_diagnostics: client is null");
  return std::make_shared<RedisDiagnostics>(std::move(client), std::move(claimer));
}

}  // namespace fleetcron::redis
