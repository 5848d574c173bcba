// `fleetcron init`: declares a coordination store new, so that a fleet's
// first start on it loses nothing (docs/redis.md and docs/nats.md, "A new
// store"); on PostgreSQL, `fleetcron migrate` does it.
#include <fmt/format.h>

#include <ostream>

#include "daemon/cli/commands.h"
#include "daemon/run/coordination_setup.h"
#include "fleetcron/duration.h"
#include "fleetcron/nats/connection.h"
#include "fleetcron/postgres/uri.h"
#include "fleetcron/redis/claimer.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {

namespace {

int init_redis(const Settings& settings, std::ostream& out, std::ostream& err) {
  auto client = std::make_shared<redis::Client>(redis_options(settings));
  redis::Claimer claimer(client, redis_claimer_options(settings));
  const redis::NewStoreDeclaration answer = claimer.declare_new_store();
  const std::string& epoch_key = claimer.options().epoch_key;
  switch (answer.status) {
    case redis::NewStoreDeclaration::Status::declared:
      out << fmt::format("init: {}: declared new: wrote {} = \"{}\"; no fire is refused as scheduled before a reset, "
                         "and a later restart without data or a failover is still detected\n",
                         client->describe(), epoch_key, answer.found);
      return 0;
    case redis::NewStoreDeclaration::Status::has_epoch:
      out << fmt::format("init: {}: already has its epoch record {} = \"{}\" (an earlier init, or a replica that "
                         "claimed first); nothing written\n",
                         client->describe(), epoch_key, answer.found);
      return 0;
    case redis::NewStoreDeclaration::Status::holds_claims:
      err << fmt::format("init: {}: not new: it holds the fence counter {} = {} (claims were made here) but no "
                         "epoch record, so it may have lost data; nothing written (the replicas decide at their "
                         "first claim)\n",
                         client->describe(), claimer.options().fence_key, answer.found);
      return 1;
  }
  return 1;
}

int init_nats(Settings settings, std::ostream& out) {
  const nats::ConnectionOptions options = parse_nats_uri(settings.coordinator, settings);
  const auto connection = nats::Connection::connect(options);
  const auto bucket = connection->bucket(claim_bucket_config(settings));
  const auto created = bucket->stream_times().stream_created;
  const Instant at{std::chrono::duration_cast<Instant::duration>(created.time_since_epoch())};
  const Instant ready = at + std::chrono::duration_cast<Instant::duration>(max_clock_skew(settings));
  out << fmt::format("init: {}: claims bucket {} created {}; fires scheduled from {} on (its creation + "
                     "max_clock_skew {}) are claimed, earlier ones are refused as before a reset: start the "
                     "replicas after that\n",
                     connection->describe(), bucket->name(), format_rfc3339(at), format_rfc3339(ready),
                     format_duration(max_clock_skew(settings)));
  return 0;
}

}  // namespace

int run_init_command(const Settings& settings, std::ostream& out, std::ostream& err) {
  if (settings.coordinator == "memory") {
    err << "init: the memory coordinator keeps nothing between starts: there is no store to declare\n";
    return 2;
  }
  if (postgres::is_postgres_uri(settings.coordinator)) {
    out << "init: PostgreSQL: `fleetcron migrate` creates the tables; on new ones it declares the store new\n";
    return run_migrate_command(settings, out, err);
  }
  try {
    if (settings.coordinator.starts_with("nats://") || settings.coordinator.starts_with("tls://")) {
      return init_nats(settings, out);
    }
    return init_redis(settings, out, err);
  } catch (const std::exception& e) {
    err << "init: " << terminal_safe(e.what()) << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
