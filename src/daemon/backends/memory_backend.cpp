// Memory: claims, the lease and the fleet state inside this one process.
// It coordinates nothing beyond it, and keeps nothing past its end.
#include <ostream>
#include <stdexcept>

#include "daemon/backends/backend.h"
#include "fleetcron/memory_coordination.h"
#include "fleetcron/memory_fleet_state.h"

namespace fleetcron::daemon {

namespace {

class MemoryBackend final : public Backend {
 public:
  std::string_view name() const override { return "memory"; }
  std::string_view forms() const override { return "memory"; }
  std::string build_info() const override { return "memory (one process)"; }
  bool accepts(std::string_view coordinator) const override { return coordinator == "memory"; }
  bool in_process() const override { return true; }

  Coordination connect(const Settings& settings, const std::string&) const override {
    Coordination out;
    out.description = "memory";
    if (settings.coordination != CoordinationMode::leader) {
      out.claimer = std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
    }
    if (settings.coordination != CoordinationMode::claim) {
      auto lease = std::make_shared<MemoryLease>(system_clock(), settings.leader_ttl.value_or(MemoryLease::default_lease_ttl));
      out.elector = lease->make_elector();
      out.resources = lease;
    }
    // In-process: the ledger, the controls and the registry for the API
    // and the status page; nothing survives the process.
    if (keeps_fleet_state(settings)) out.fleet_state = std::make_shared<MemoryFleetState>(system_clock());
    out.diagnostics = memory_diagnostics();
    return out;
  }

  std::shared_ptr<Claimer> offline_claimer(const Settings& settings) const override {
    if (settings.coordination == CoordinationMode::leader) return nullptr;
    return std::make_shared<MemoryClaimer>(system_clock(), settings.claim_ttl);
  }

  // The commands refuse an in-process store before asking it.
  StoreView read_view(const Settings&, bool) const override {
    throw std::logic_error("the memory coordinator has no store outside its process to read");
  }
  std::shared_ptr<FleetState> open_fleet_state(const Settings&) const override {
    throw std::logic_error("the memory coordinator keeps no fleet state outside its process");
  }

  int init(const Settings&, std::ostream&, std::ostream& err) const override {
    err << "init: the memory coordinator keeps nothing between starts: there is no store to declare\n";
    return 2;
  }

 protected:
  std::optional<ReplicaSetting> claim_place(const Settings&) const override { return std::nullopt; }
  std::chrono::nanoseconds default_leader_ttl() const override { return MemoryLease::default_lease_ttl; }
  std::vector<ReplicaSetting> lease_place(const Settings&) const override { return {}; }
};

}  // namespace

const Backend& memory_backend() {
  static const MemoryBackend backend;
  return backend;
}

}  // namespace fleetcron::daemon
