#include "daemon/backends/backend.h"

#include <fmt/format.h>

#include <array>
#include <ostream>

#include "fleetcron/duration.h"

namespace fleetcron::daemon {

bool keeps_fleet_state(const Settings& settings) noexcept {
  return settings.catch_up > std::chrono::nanoseconds::zero() || settings.history > 0;
}

std::vector<ReplicaSetting> Backend::dedup_settings(const Settings& settings) const {
  std::vector<ReplicaSetting> out{{"mode", std::string(to_string(settings.coordination))}};
  if (settings.coordination != CoordinationMode::leader) {
    out.push_back({"claim_ttl", format_duration(settings.claim_ttl)});
    out.push_back({"max_clock_skew", format_duration(max_clock_skew(settings))});
    if (auto place = claim_place(settings)) out.push_back(std::move(*place));
  }
  if (settings.coordination != CoordinationMode::claim) {
    out.push_back({"leader_ttl", format_duration(settings.leader_ttl.value_or(default_leader_ttl()))});
    for (auto& setting : lease_place(settings)) out.push_back(std::move(setting));
  }
  return out;
}

int Backend::migrate(const Settings&, std::ostream&, std::ostream& err) const {
  err << fmt::format("migrate: a {} coordinator needs no tables; only PostgreSQL (postgres://…) has tables to create\n",
                     name());
  return 2;
}

namespace {

// The table: backend_for() tries them in this order.
const std::array<const Backend*, 4>& all_backends() {
  static const std::array<const Backend*, 4> table{&memory_backend(), &redis_backend(), &nats_backend(),
                                                   &postgres_backend()};
  return table;
}

}  // namespace

std::vector<const Backend*> backends() { return {all_backends().begin(), all_backends().end()}; }

const Backend& backend_for(std::string_view coordinator) {
  std::string forms;
  for (const Backend* backend : all_backends()) {
    if (backend->accepts(coordinator)) return *backend;
    forms += forms.empty() ? "" : backend == all_backends().back() ? " or " : ", ";
    forms += backend->forms();
  }
  throw SettingsError(fmt::format("coordinator \"{}\": expected {}", without_userinfo(std::string(coordinator)), forms));
}

}  // namespace fleetcron::daemon
