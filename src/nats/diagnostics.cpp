#include "fleetcron/nats/diagnostics.h"

#include <stdexcept>

namespace fleetcron::nats {

namespace {

class NatsDiagnostics final : public fleetcron::Diagnostics {
 public:
  NatsDiagnostics(std::shared_ptr<Connection> connection, std::shared_ptr<Claimer> claimer)
      : connection_(std::move(connection)), claimer_(std::move(claimer)) {}
  void ping() override { connection_->ping(); }  // connects if need be
  std::optional<ClockOffset> clock_offset() override { return claimer_ ? claimer_->clock_offset() : std::nullopt; }

 private:
  std::shared_ptr<Connection> connection_;
  std::shared_ptr<Claimer> claimer_;
};

}  // namespace

std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(std::shared_ptr<Connection> connection,
                                                         std::shared_ptr<Claimer> claimer) {
  if (!connection) throw std::invalid_argument("nats::make_diagnostics: connection is null");
  return std::make_shared<NatsDiagnostics>(std::move(connection), std::move(claimer));
}

}  // namespace fleetcron::nats
