#include "postgres/pool.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "fleetcron/backend_error.h"

namespace fleetcron::postgres::detail {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string trimmed(const char* text) {
  std::string out = text ? text : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Waits until the socket is ready for `events` or the deadline passes.
bool wait_socket(int socket, short events, SteadyClock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) return false;
    pollfd fd{socket, events, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 1000 * 60)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

bool auth_failure(const std::string& message) {
  for (const char* sign : {"password authentication failed", "no password supplied", "authentication failed",
                           "pg_hba.conf", "role \"", "permission denied"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

/// A connection refused for good by its configuration: a database that
/// does not exist, a server certificate that does not verify (sslmode
/// verify-ca, verify-full).
bool config_failure(const std::string& message) {
  if (message.find("database \"") != std::string::npos && message.find("\" does not exist") != std::string::npos) {
    return true;
  }
  for (const char* sign : {"certificate verify failed", "does not match host name", "root certificate file"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

const std::string& Rows::text(std::size_t r, std::size_t c) const {
  static const std::string none;
  const auto& value = rows.at(r).at(c);
  return value ? *value : none;
}

std::string to_bytea(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

std::string from_bytea(std::string_view hex) {
  if (!hex.starts_with("\\x") || hex.size() % 2 != 0)
    throw ProtocolError("not bytea hex output: " + std::string(hex.substr(0, 16)));
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  out.reserve(hex.size() / 2 - 1);
  for (std::size_t i = 2; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  return out;
}

std::string text_array(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

/// One libpq connection; `broken` once it can no longer be trusted.
class Conn {
 public:
  Conn(const ConnectionOptions& options, const std::string& description);
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  Rows exec(std::string_view sql, const Params& params);
  bool broken = false;

 private:
  [[noreturn]] void fail_result(PGresult* result);
  PGresult* await_result(SteadyClock::time_point deadline);
  /// Sends what libpq still buffers, under the deadline.
  void flush(SteadyClock::time_point deadline);
  /// The answer to what was sent: rows, or the first error thrown.
  Rows collect(SteadyClock::time_point deadline);

  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_{nullptr, PQfinish};
  const std::string& description_;
  std::chrono::milliseconds statement_timeout_;
  std::map<std::string, std::string> prepared_;  // statement text -> its name on this connection
};

Conn::Conn(const ConnectionOptions& options, const std::string& description)
    : description_(description), statement_timeout_(options.statement_timeout) {
  const bool password = !options.password.empty();
  const char* keywords[] = {"dbname", "fallback_application_name", password ? "password" : nullptr, nullptr};
  const char* values[] = {options.uri.c_str(), options.application_name.c_str(),
                          password ? options.password.c_str() : nullptr, nullptr};
  conn_.reset(PQconnectStartParams(keywords, values, 1));
  if (!conn_) throw ConnectError(description_ + ": out of memory");
  const auto deadline = SteadyClock::now() + options.connect_timeout;
  PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
  while (PQstatus(conn_.get()) != CONNECTION_BAD && polling != PGRES_POLLING_OK && polling != PGRES_POLLING_FAILED) {
    const short events = polling == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    if (!wait_socket(PQsocket(conn_.get()), events, deadline)) {
      throw TimeoutError(
          fmt::format("{}: no connection within connect_timeout {} ms", description_, options.connect_timeout.count()));
    }
    polling = PQconnectPoll(conn_.get());
  }
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    const std::string message = fmt::format("{}: {}", description_, trimmed(PQerrorMessage(conn_.get())));
    if (auth_failure(message)) throw AuthError(message);
    if (config_failure(message)) throw ConfigError(message);
    throw ConnectError(message);
  }
  // Non-blocking: a send into a full socket buffer (a partitioned server)
  // waits under the statement's deadline too (flush()).
  if (PQsetnonblocking(conn_.get(), 1) != 0) throw ConnectError(description_ + ": cannot make the connection non-blocking");
  // Bytes come back as bytea's hex form whatever the role's default is.
  (void)exec(fmt::format("SET statement_timeout = {}", statement_timeout_.count()), {});
  (void)exec("SET bytea_output = hex", {});
}

PGresult* Conn::await_result(SteadyClock::time_point deadline) {
  while (PQisBusy(conn_.get())) {
    if (!wait_socket(PQsocket(conn_.get()), POLLIN, deadline)) {
      broken = true;
      throw TimeoutError(
          fmt::format("{}: no answer within statement_timeout {} ms (+1 s)", description_, statement_timeout_.count()));
    }
    if (!PQconsumeInput(conn_.get())) {
      broken = true;
      throw IoError(fmt::format("{}: {}", description_, trimmed(PQerrorMessage(conn_.get()))));
    }
  }
  return PQgetResult(conn_.get());
}

void Conn::fail_result(PGresult* result) {
  const std::string state = trimmed(PQresultErrorField(result, PG_DIAG_SQLSTATE));
  std::string message = fmt::format("{}: {} (SQLSTATE {})", description_, trimmed(PQresultErrorMessage(result)), state);
  PQclear(result);
  if (PQstatus(conn_.get()) == CONNECTION_BAD) broken = true;
  if (state == "57014") throw TimeoutError(message);  // statement_timeout
  if (state == "0A000") broken = true;  // a prepared plan the schema changed under: a new connection prepares anew
  if (state.starts_with("28") || state == "42501") throw AuthError(message);
  if (state.starts_with("08") || state.starts_with("57P")) {  // connection failure, terminated, shut down
    broken = true;
    throw IoError(message);
  }
  if (state == "42P01" || state == "42703" || state == "42883") message += ": run `fleetcron migrate`";
  throw ProtocolError(message);
}

Rows Conn::exec(std::string_view sql, const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& param : params) values.push_back(param ? param->c_str() : nullptr);
  const std::string text(sql);
  const auto deadline = SteadyClock::now() + statement_timeout_ + std::chrono::seconds{1};
  const int count = static_cast<int>(values.size());
  bool sent = false;
  if (params.empty()) {
    sent = PQsendQueryParams(conn_.get(), text.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) != 0;
  } else {
    // Statements with parameters are the backend's own, few and repeated:
    // each is prepared once per connection, so it is planned once.
    auto name = prepared_.find(text);
    if (name == prepared_.end()) {
      const std::string fresh = fmt::format("fleetcron_{}", prepared_.size());
      if (!PQsendPrepare(conn_.get(), fresh.c_str(), text.c_str(), count, nullptr)) {
        broken = true;
        throw IoError(fmt::format("{}: {}", description_, trimmed(PQerrorMessage(conn_.get()))));
      }
      flush(deadline);
      (void)collect(deadline);
      name = prepared_.emplace(text, fresh).first;
    }
    sent = PQsendQueryPrepared(conn_.get(), name->second.c_str(), count, values.data(), nullptr, nullptr, 0) != 0;
  }
  if (!sent) {
    broken = true;
    throw IoError(fmt::format("{}: {}", description_, trimmed(PQerrorMessage(conn_.get()))));
  }
  flush(deadline);
  return collect(deadline);
}

void Conn::flush(SteadyClock::time_point deadline) {
  while (true) {
    const int left = PQflush(conn_.get());
    if (left == 0) return;
    if (left < 0 || !wait_socket(PQsocket(conn_.get()), POLLOUT | POLLIN, deadline) || !PQconsumeInput(conn_.get())) {
      broken = true;
      throw TimeoutError(fmt::format("{}: could not send the statement within statement_timeout {} ms (+1 s): {}",
                                     description_, statement_timeout_.count(), trimmed(PQerrorMessage(conn_.get()))));
    }
  }
}

Rows Conn::collect(SteadyClock::time_point deadline) {
  using Result = std::unique_ptr<PGresult, void (*)(PGresult*)>;
  Rows rows;
  Result failed{nullptr, PQclear};  // freed too when a later wait throws
  while (true) {
    Result result{await_result(deadline), PQclear};
    if (!result) break;
    const ExecStatusType status = PQresultStatus(result.get());
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      if (!failed) failed = std::move(result);  // read on to the end of the answer, then throw
      continue;
    }
    const int columns = PQnfields(result.get());
    for (int r = 0; r < PQntuples(result.get()); ++r) {
      auto& row = rows.rows.emplace_back();
      for (int c = 0; c < columns; ++c) {
        if (PQgetisnull(result.get(), r, c)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(PQgetvalue(result.get(), r, c),
                                       static_cast<std::size_t>(PQgetlength(result.get(), r, c))));
        }
      }
    }
    const char* affected = PQcmdTuples(result.get());
    if (affected && *affected) rows.affected = std::stoul(affected);
  }
  if (failed) fail_result(failed.release());
  if (PQstatus(conn_.get()) == CONNECTION_BAD) {
    broken = true;
    throw IoError(fmt::format("{}: {}", description_, trimmed(PQerrorMessage(conn_.get()))));
  }
  return rows;
}

Rows Session::exec(std::string_view sql, const Params& params) { return conn_.exec(sql, params); }

struct Pool::State {
  std::mutex mutex;
  std::condition_variable freed;
  std::vector<std::unique_ptr<Conn>> idle;
  std::size_t open = 0;  // idle and checked out
};

/// A connection checked out of the pool for one call.
class Pool::Lease {
 public:
  explicit Lease(Pool& pool) : pool_(pool) {
    auto& state = *pool_.state_;
    std::unique_lock lock(state.mutex);
    const auto deadline = SteadyClock::now() + pool_.options_.statement_timeout;
    while (state.idle.empty() && state.open >= pool_.options_.pool_size) {
      if (state.freed.wait_until(lock, deadline) == std::cv_status::timeout && state.idle.empty() &&
          state.open >= pool_.options_.pool_size) {
        throw TimeoutError(fmt::format("{}: no free pooled connection within statement_timeout {} ms",
                                       pool_.description_, pool_.options_.statement_timeout.count()));
      }
    }
    if (!state.idle.empty()) {
      conn_ = std::move(state.idle.back());
      state.idle.pop_back();
      return;
    }
    ++state.open;
    lock.unlock();
    try {
      conn_ = std::make_unique<Conn>(pool_.options_, pool_.description_);
    } catch (...) {
      lock.lock();
      --state.open;
      state.freed.notify_one();
      throw;
    }
  }
  ~Lease() {
    auto& state = *pool_.state_;
    std::lock_guard guard(state.mutex);
    if (conn_->broken) {
      --state.open;
      conn_.reset();
    } else {
      state.idle.push_back(std::move(conn_));
    }
    state.freed.notify_one();
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Conn& conn() { return *conn_; }

 private:
  Pool& pool_;
  std::unique_ptr<Conn> conn_;
};

Pool::Pool(ConnectionOptions options, std::string description)
    : options_(std::move(options)), description_(std::move(description)), state_(std::make_unique<State>()) {}

Pool::~Pool() = default;

Rows Pool::exec(std::string_view sql, const Params& params) {
  Lease lease(*this);
  return lease.conn().exec(sql, params);
}

void Pool::transaction(const std::function<void(Session&)>& body) {
  Lease lease(*this);
  Conn& conn = lease.conn();
  (void)conn.exec("BEGIN", {});
  try {
    Session session(conn);
    body(session);
    (void)conn.exec("COMMIT", {});
  } catch (...) {
    if (!conn.broken) {
      try {
        (void)conn.exec("ROLLBACK", {});
      } catch (...) {
        conn.broken = true;
      }
    }
    throw;
  }
}

}  // namespace fleetcron::postgres::detail
