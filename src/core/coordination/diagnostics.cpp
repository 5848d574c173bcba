#include "fleetcron/diagnostics.h"

namespace fleetcron {

namespace {

class MemoryDiagnostics final : public Diagnostics {
 public:
  void ping() override {}  // the store is this process
};

}  // namespace

std::shared_ptr<Diagnostics> memory_diagnostics() { return std::make_shared<MemoryDiagnostics>(); }

}  // namespace fleetcron
