// The scheduler's side of the replica registry: the record's contents it
// hands RegistryMembership (its jobs, its runs), and the verdict it asks.
#include "core/support/fnv1a.h"
#include "core/scheduler/scheduler_impl.h"

namespace fleetcron {

using detail::Entry;

/// The scheduler as the registry membership sees it.
class Scheduler::Impl::RegistryHost final : public detail::RegistryMembership::Host {
 public:
  explicit RegistryHost(Impl& impl) : impl_(impl) {}

  Instant fleet_now() override { return impl_.fleet_now(); }
  std::uint64_t jobs_digest() override {
    std::lock_guard guard(impl_.mutex_);
    return impl_.jobs_digest_;
  }
  std::vector<CataloguedJob> catalogued_jobs(Instant now) override {
    std::lock_guard guard(impl_.mutex_);
    std::vector<CataloguedJob> jobs;
    jobs.reserve(impl_.keys_.size());
    for (const auto& [key, id] : impl_.keys_) {
      const Entry& entry = *impl_.entries_.at(id);
      const Schedule& schedule = *entry.schedule;
      jobs.push_back(CataloguedJob{key, std::string(schedule.spec()), std::string(schedule.zone().name()),
                                   impl_.options_.seconds_field, cursor_instant(now), impl_.options_.fleet.replica_id,
                                   entry.settings->every_replica});
    }
    return jobs;
  }
  std::vector<RunningFire> running_fires() override { return impl_.running_fires(); }
  void report_lost(const std::vector<ReplicaRecord>& expired) override { impl_.report_lost(expired); }
  std::uint64_t mark_runs_read() override { return ++impl_.runs_read_marks_; }
  void runs_listed(std::uint64_t mark) override {
    if (impl_.ledger_) impl_.ledger_->runs_listed(mark);
  }
  void log(LogLevel level, const std::string& message) override { impl_.log(level, message); }

 private:
  Impl& impl_;
};

std::unique_ptr<detail::RegistryMembership> Scheduler::Impl::make_membership() {
  if (!options_.fleet.state || !options_.fleet.registry) return nullptr;
  registry_host_ = std::make_shared<RegistryHost>(*this);
  return std::make_unique<detail::RegistryMembership>(*registry_host_, options_.fleet, clock_);
}

bool Scheduler::Impl::registry_on() const { return membership_ != nullptr; }

Instant Scheduler::Impl::fleet_now() { return store_clock_ ? store_clock_->now() : clock_->now(); }

std::optional<std::string> Scheduler::Impl::registry_verdict() const {
  return membership_ ? membership_->verdict() : std::optional<std::string>(std::string());
}

std::string Scheduler::Impl::settings_refusal() { return membership_ ? membership_->settings_refusal() : std::string(); }

void Scheduler::Impl::toggle_jobs_digest(const Entry& entry) {
  if (entry.identity.key.empty()) return;
  std::uint64_t hash = detail::fnv1a(entry.identity.key, detail::schedule_digest(*entry.schedule));
  // A job every replica runs differs from the same job run once (a change
  // of scope is recatalogued at once); fleet jobs hash as before.
  if (entry.settings->every_replica) hash = (hash ^ 0x9e3779b97f4a7c15ULL) * 1099511628211ULL;
  jobs_digest_ ^= hash;  // a sum of the entries, whatever their order
}

}  // namespace fleetcron
