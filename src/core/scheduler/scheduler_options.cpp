// Validation of SchedulerOptions and EntryOptions: every error names the
// option and the value.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "core/scheduler/scheduler_impl.h"
#include "fleetcron/duration.h"
#include "fleetcron/parse_error.h"

namespace fleetcron {

std::string_view to_string(OverlapPolicy policy) noexcept {
  switch (policy) {
    case OverlapPolicy::allow: return "allow";
    case OverlapPolicy::skip: return "skip";
    case OverlapPolicy::queue: return "queue";
  }
  return "unknown";
}

}  // namespace fleetcron

namespace fleetcron::detail {
namespace {

constexpr std::size_t max_workers = 4096;
constexpr std::size_t max_queue_limit = 10'000'000;
constexpr std::size_t max_entries_limit = 100'000'000;
constexpr std::size_t max_observer_queue = 1'000'000;
constexpr std::size_t max_ledger_queue = 1'000'000;
constexpr int max_retries_limit = 1000;
constexpr std::size_t max_key_bytes = 1024;
constexpr std::chrono::nanoseconds max_setting_duration = std::chrono::hours{24 * 366};

[[noreturn]] void reject(std::string_view owner, std::string_view option, std::string_view value, std::string_view why) {
  throw std::invalid_argument(fmt::format("{} option {}: {} {}", owner, option, value, why));
}

void check_range(std::string_view owner, std::string_view option, std::size_t value, std::size_t low, std::size_t high) {
  if (value < low || value > high) reject(owner, option, std::to_string(value), fmt::format("is not between {} and {}", low, high));
}

void check_duration(std::string_view owner, std::string_view option, std::chrono::nanoseconds value, bool allow_zero) {
  if (value < std::chrono::nanoseconds::zero() || (!allow_zero && value == std::chrono::nanoseconds::zero())) {
    reject(owner, option, format_duration(value), allow_zero ? "must not be negative" : "must be greater than zero");
  }
  if (value > max_setting_duration) reject(owner, option, format_duration(value), "is above the maximum of 366 days");
}

// A background thread's period: 10 ms to 1 minute.
void check_interval(std::string_view owner, std::string_view option, std::chrono::nanoseconds value) {
  if (value < std::chrono::milliseconds{10} || value > std::chrono::minutes{1}) {
    reject(owner, option, format_duration(value), "is not between 10ms and 1m");
  }
}

// The registry's bounds, but for the fields the scheduler sets itself.
void check_announcement(std::string_view owner, ReplicaAnnouncement replica) {
  replica.replica_id = "replica";
  replica.jobs_digest.clear();
  try {
    check_replica_announcement(replica);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{} option replica: {}", owner, e.what()));
  }
}

void default_logger(LogLevel level, std::string_view message) {
  if (level < LogLevel::warning) return;
  std::cerr << "fleetcron " << (level == LogLevel::warning ? "warning" : "error") << ": " << message << '\n';
}

std::string trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

void validate_retry(std::string_view owner, const RetryPolicy& retry) {
  if (retry.max_retries < 0 || retry.max_retries > max_retries_limit) {
    reject(owner, "retry.max_retries", std::to_string(retry.max_retries), "is not between 0 and 1000");
  }
  check_duration(owner, "retry.initial_delay", retry.initial_delay, false);
  check_duration(owner, "retry.max_delay", retry.max_delay, false);
  if (retry.max_delay < retry.initial_delay) {
    reject(owner, "retry.max_delay", format_duration(retry.max_delay),
           fmt::format("is below retry.initial_delay {}", format_duration(retry.initial_delay)));
  }
  if (!std::isfinite(retry.multiplier) || retry.multiplier < 1.0 || retry.multiplier > 1000.0) {
    reject(owner, "retry.multiplier", fmt::format("{}", retry.multiplier), "is not between 1 and 1000");
  }
  if (!std::isfinite(retry.jitter_fraction) || retry.jitter_fraction < 0.0 || retry.jitter_fraction > 1.0) {
    reject(owner, "retry.jitter_fraction", fmt::format("{}", retry.jitter_fraction), "is not between 0 and 1");
  }
}

namespace {

void check_retention(std::string_view owner, const LedgerRetention& retention) {
  try {
    check_ledger_retention(retention);
  } catch (const std::invalid_argument& e) {
    std::string_view what = e.what();
    constexpr std::string_view prefix = "ledger retention: ";
    if (what.starts_with(prefix)) what.remove_prefix(prefix.size());
    throw std::invalid_argument(fmt::format("{}.ledger_retention: {}", owner, what));
  }
}

}  // namespace

void validate(SchedulerOptions& options) {
  constexpr std::string_view owner = "scheduler";
  check_duration(owner, "missed_tolerance", options.missed_tolerance, false);
  check_duration(owner, "jitter", options.jitter, true);
  if (options.retry) validate_retry(owner, *options.retry);
  check_range(owner, "limits.max_concurrent", options.limits.max_concurrent, 1, max_workers);
  check_range(owner, "limits.max_queued", options.limits.max_queued, 1, max_queue_limit);
  check_range(owner, "limits.max_entries", options.limits.max_entries, 1, max_entries_limit);
  check_range(owner, "limits.observer_queue", options.limits.observer_queue, 1, max_observer_queue);
  for (std::size_t i = 0; i < options.observers.size(); ++i) {
    if (!options.observers[i]) reject(owner, "observers", fmt::format("[{}]", i), "is null");
  }
  check_duration(owner, "fleet.catch_up_reach", options.fleet.catch_up_reach, true);
  check_range(owner, "limits.ledger_queue", options.limits.ledger_queue, 1, max_ledger_queue);
  check_retention(owner, options.fleet.ledger_retention);
  if (options.fleet.ledger_gather_window < std::chrono::nanoseconds::zero() ||
      options.fleet.ledger_gather_window > std::chrono::seconds{1}) {
    reject(owner, "fleet.ledger_gather_window", format_duration(options.fleet.ledger_gather_window),
           "is not between 0 and 1s");
  }
  check_interval(owner, "fleet.control_poll_interval", options.fleet.control_poll_interval);
  check_interval(owner, "fleet.registry_heartbeat_interval", options.fleet.registry_heartbeat_interval);
  check_announcement(owner, options.fleet.replica);
  if (options.fleet.replica_id.size() > 64 ||
      std::any_of(options.fleet.replica_id.begin(), options.fleet.replica_id.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    reject(owner, "fleet.replica_id", "\"" + quote_for_message(options.fleet.replica_id, 80) + "\"",
           "must be 1 to 64 characters without whitespace");
  }
  if (options.fleet.replica_id.empty()) options.fleet.replica_id = random_replica_id();
  if (!options.clock) options.clock = system_clock();
  if (!options.logger) options.logger = default_logger;
}

void check_entry_options(EntryOptions& entry) {
  constexpr std::string_view owner = "entry";
  entry.key = trim(entry.key);
  if (entry.key.size() > max_key_bytes) reject(owner, "key", quote_for_message(entry.key, 40), "is longer than 1024 bytes");
  for (const char c : entry.key) {
    if (c == '@' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      reject(owner, "key", "\"" + quote_for_message(entry.key) + "\"", "must not contain '@' or control characters");
    }
  }
  check_duration(owner, "timeout", entry.timeout, true);
  check_duration(owner, "attempt_timeout", entry.attempt_timeout, true);
  if (entry.jitter) check_duration(owner, "jitter", *entry.jitter, true);
  if (entry.retry) validate_retry(owner, *entry.retry);
  if (entry.catch_up_reach) check_duration(owner, "catch_up_reach", *entry.catch_up_reach, true);
  if (entry.ledger_retention) check_retention(owner, *entry.ledger_retention);
  if (entry.recover_within < std::chrono::seconds{1} || entry.recover_within > std::chrono::hours{24 * 7}) {
    reject(owner, "recover_within", format_duration(entry.recover_within), "is not between 1s and 7d");
  }
  if (entry.recover_max < 1 || entry.recover_max > 10) {
    reject(owner, "recover_max", std::to_string(entry.recover_max), "is not between 1 and 10");
  }
}

std::shared_ptr<const EntrySettings> resolve(const SchedulerOptions& scheduler, const EntryOptions& entry) {
  auto settings = std::make_shared<EntrySettings>();
  settings->timeout = entry.timeout;
  settings->attempt_timeout = entry.attempt_timeout;
  settings->jitter = entry.jitter.value_or(scheduler.jitter);
  settings->retry = entry.retry ? entry.retry : scheduler.retry;
  if (settings->retry && settings->retry->max_retries == 0) settings->retry.reset();
  settings->missed_fire = entry.missed_fire.value_or(scheduler.missed_fire);
  const bool fleet = entry.scope == EntryScope::fleet;
  settings->claimer = !fleet ? nullptr : entry.claimer ? *entry.claimer : scheduler.claimer;
  settings->leader_gated = fleet && scheduler.elector != nullptr;
  settings->every_replica = !fleet;
  settings->overlap = entry.overlap;
  settings->catch_up_reach = scheduler.fleet.state && fleet ? entry.catch_up_reach.value_or(scheduler.fleet.catch_up_reach)
                                                            : std::chrono::nanoseconds::zero();
  settings->ledger_retention = entry.ledger_retention.value_or(scheduler.fleet.ledger_retention);
  settings->recover = entry.recover;
  settings->recover_within = entry.recover_within;
  settings->recover_max = entry.recover_max;
  settings->pause_on_failure = entry.pause_on_failure;
  return settings;
}

}  // namespace fleetcron::detail
