#include "fleetcron/postgres/diagnostics.h"

#include <stdexcept>

namespace fleetcron::postgres {

namespace {

class PostgresDiagnostics final : public fleetcron::Diagnostics {
 public:
  PostgresDiagnostics(std::shared_ptr<Connection> connection, TableNames tables, bool with_fleet_state,
                      std::shared_ptr<Claimer> claimer)
      : connection_(std::move(connection)),
        tables_(std::move(tables)),
        with_fleet_state_(with_fleet_state),
        claimer_(std::move(claimer)) {}
  void ping() override { connection_->ping(); }
  std::optional<ClockOffset> clock_offset() override { return claimer_ ? claimer_->clock_offset() : std::nullopt; }
  std::vector<std::string> missing_schema() override {
    return postgres::missing_schema(*connection_, tables_, with_fleet_state_);
  }

 private:
  std::shared_ptr<Connection> connection_;
  TableNames tables_;
  bool with_fleet_state_;
  std::shared_ptr<Claimer> claimer_;
};

}  // namespace

std::shared_ptr<fleetcron::Diagnostics> make_diagnostics(std::shared_ptr<Connection> connection, TableNames tables,
                                                         bool with_fleet_state, std::shared_ptr<Claimer> claimer) {
  if (!connection) throw std::invalid_argument("postgres::make_diagnostics: connection is null");
  return std::make_shared<PostgresDiagnostics>(std::move(connection), std::move(tables), with_fleet_state,
                                               std::move(claimer));
}

}  // namespace fleetcron::postgres
