#include "fleetcron/postgres/elector.h"

#include <fmt/format.h>

#include "fleetcron/backend/lease_elector.h"
#include "fleetcron/postgres/claimer.h"
#include "postgres/pool.h"

namespace fleetcron::postgres {

namespace {

// The lease row: the reference's upsert (taken when ours or expired), with
// the term kept while the same holder renews, and raised to at least the
// server's µs when the holder changes, the lease had expired, or the
// elector asks for a fresh term.
class FLEETCRON_LOCAL PostgresLease final : public LeaseStore {
 public:
  PostgresLease(std::shared_ptr<Connection> connection, const ElectorOptions& options)
      : connection_(std::move(connection)),
        leader_name_(options.leader_name),
        ttl_seconds_(fmt::format("{:.6f}", std::chrono::duration<double>(options.lease.lease_ttl).count())),
        campaign_(fmt::format(
            "INSERT INTO {0} AS l (name, holder, expires_at) VALUES ($1, $2, now() + ($3::float8 * interval '1 "
            "second')) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, "
            "term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at >= now() AND NOT $4::boolean THEN l.term "
            "ELSE greatest(l.term + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) END "
            "WHERE l.holder = EXCLUDED.holder OR l.expires_at < now() RETURNING term",
            options.tables.leader)),
        release_(fmt::format("DELETE FROM {} WHERE name = $1 AND holder = $2", options.tables.leader)) {}

  LeaseAnswer campaign(std::string_view identity, std::chrono::nanoseconds, std::uint64_t, bool fresh_term) override {
    try {
      const detail::Rows rows = connection_->pool().exec(
          campaign_, {leader_name_, std::string(identity), ttl_seconds_, fresh_term ? "true" : "false"});
      if (rows.empty()) return {false, 0, {}};
      return {true, std::stoull(rows.text(0, 0)), {}};
    } catch (const std::exception& e) {
      return {false, 0, e.what()};
    }
  }

  std::string release(std::string_view identity) override {
    try {
      (void)connection_->pool().exec(release_, {leader_name_, std::string(identity)});
      return {};
    } catch (const std::exception& e) {
      return fmt::format("resign: {}", e.what());
    }
  }

 private:
  std::shared_ptr<Connection> connection_;
  std::string leader_name_;
  std::string ttl_seconds_;
  std::string campaign_;
  std::string release_;
};

ElectorOptions checked(ElectorOptions options, const std::shared_ptr<Connection>& connection) {
  if (!connection) throw std::invalid_argument("postgres::Elector: connection is null");
  check_table_names(options.tables);
  if (options.leader_name.empty()) throw std::invalid_argument("postgres::ElectorOptions.leader_name: empty");
  if (options.holder.empty()) options.holder = make_holder();
  return options;
}

}  // namespace

class FLEETCRON_LOCAL Elector::Impl {
 public:
  Impl(std::shared_ptr<Connection> connection, ElectorOptions options)
      : options_(checked(std::move(options), connection)),
        lease_(std::make_shared<PostgresLease>(std::move(connection), options_), options_.holder,
               options_.lease, "postgres::ElectorOptions.lease") {
    options_.lease = lease_.options();  // the defaults resolved
  }
  ElectorOptions options_;
  LeaseElector lease_;
};

Elector::Elector(std::shared_ptr<Connection> connection, ElectorOptions options)
    : impl_(std::make_unique<Impl>(std::move(connection), std::move(options))) {}
Elector::~Elector() = default;
Leadership Elector::is_leader() { return impl_->lease_.is_leader(); }
void Elector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  impl_->lease_.on_leadership_lost(std::move(lost));
}
void Elector::resign() { impl_->lease_.resign(); }
void Elector::set_liveness(std::function<bool()> alive) { impl_->lease_.set_liveness(std::move(alive)); }
const std::string& Elector::identity() const noexcept { return impl_->lease_.identity(); }
ElectorState Elector::state() const { return impl_->lease_.state(); }
const ElectorOptions& Elector::options() const noexcept { return impl_->options_; }

std::optional<LeaderRow> read_leader(Connection& connection, const TableNames& tables, std::string_view leader_name) {
  check_table_names(tables);
  const detail::Rows rows = connection.pool().exec(
      fmt::format("SELECT holder, term, (extract(epoch FROM expires_at - now()) * 1000)::bigint FROM {} "
                  "WHERE name = $1 AND expires_at >= now()",
                  tables.leader),
      {std::string(leader_name)});
  if (rows.empty()) return std::nullopt;
  return LeaderRow{rows.text(0, 0), std::stoull(rows.text(0, 1)),
                   std::chrono::milliseconds{std::stoll(rows.text(0, 2))}};
}

}  // namespace fleetcron::postgres
