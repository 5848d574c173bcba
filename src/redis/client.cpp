// Client: the pool, reconnect backoff and scripts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "fleetcron/duration.h"
#include "redis/commands.h"
#include "redis/connection.h"
#include "redis/tls_context.h"

namespace fleetcron::redis {

using detail::Connection;

namespace {

// True for an error reply whose first word is `code`.
bool has_code(const Reply& reply, std::string_view code) {
  if (!reply.is_error() || !std::string_view(reply.text).starts_with(code)) return false;
  return reply.text.size() == code.size() || reply.text[code.size()] == ' ';
}

}  // namespace

bool Reply::is_error(std::string_view code) const noexcept { return has_code(*this, code); }

std::string_view to_string(Reply::Type type) noexcept {
  switch (type) {
    case Reply::Type::nil: return "nil";
    case Reply::Type::status: return "status";
    case Reply::Type::error: return "error";
    case Reply::Type::integer: return "integer";
    case Reply::Type::string: return "string";
    case Reply::Type::array: return "array";
  }
  return "unknown";
}

/// Borrows a connection for one call and gives it back (or drops it when
/// broken); counts failures.
class Client::Impl::Lease {
 public:
  explicit Lease(Impl& client) : client_(client), connection_(client.checkout()) {}
  ~Lease() { client_.checkin(std::move(connection_)); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Connection* operator->() const noexcept { return connection_.get(); }
  /// Sentinel: READONLY means the connection reached a replica (a demoted
  /// primary); it leaves the pool, and the sentinels are asked again.
  void check(const Reply& reply) const noexcept {
    if (reply.is_error("READONLY") && !client_.options_.sentinels.empty()) connection_->discard();
  }

 private:
  Impl& client_;
  std::unique_ptr<Connection> connection_;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
void Client::ping() { impl_->ping(); }
const ClientOptions& Client::options() const noexcept { return impl_->options(); }
std::string Client::describe() const { return impl_->description(); }
ClientStats Client::stats() const noexcept { return impl_->stats(); }

Client::Impl::Impl(ClientOptions options) : options_(std::move(options)) {
  validate(options_);
  description_ = redis::describe(options_);
  if (options_.tls) tls_ = std::make_unique<detail::TlsContext>(options_);
}

Client::Impl::~Impl() = default;

ClientStats Client::Impl::stats() const noexcept {
  return {commands_.load(), failures_.load(), connects_.load(), connect_failures_.load()};
}

std::unique_ptr<Connection> Client::Impl::checkout() {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + options_.request_timeout;
  while (idle_.empty() && open_ >= options_.pool_size) {
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= options_.pool_size) {
      throw TimeoutError(fmt::format("{}: all {} connections busy for {}", description_,
                                     options_.pool_size, format_duration(options_.request_timeout)));
    }
  }
  while (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    if (connection->pool_generation == generation_) return connection;
    --open_;  // to a primary the sentinels no longer name
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < next_connect_at_) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_connect_at_ - now);
    throw ConnectError(fmt::format("{} (reconnecting in {})", last_connect_error_, format_duration(wait)));
  }
  ++open_;
  lock.unlock();
  try {
    auto connection = connect();
    connects_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    backoff_ = std::chrono::milliseconds{0};
    next_connect_at_ = {};
    return connection;
  } catch (...) {
    connect_failures_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    --open_;  // whatever failed, the slot is free again
    backoff_ = backoff_.count() == 0 ? options_.reconnect_backoff_initial
                                     : std::min(backoff_ * 2, options_.reconnect_backoff_max);
    next_connect_at_ = std::chrono::steady_clock::now() + backoff_;
    try {
      throw;
    } catch (const std::exception& e) {
      last_connect_error_ = e.what();
    } catch (...) {
      last_connect_error_ = description_ + ": connect failed";
    }
    returned_.notify_one();
    throw;
  }
}

void Client::Impl::checkin(std::unique_ptr<Connection> connection) {
  const bool usable = connection && !connection->broken();
  if (!usable && connection && !options_.sentinels.empty()) forget_primary(connection->pool_generation);
  std::lock_guard guard(mutex_);
  if (usable && connection->pool_generation == generation_) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;  // dropped: the next caller connects afresh
  }
  returned_.notify_one();
}

void Client::Impl::forget_primary(std::uint64_t generation) {
  std::lock_guard guard(mutex_);
  if (generation != generation_) return;  // already forgotten
  primary_.reset();
  ++generation_;
}

std::unique_ptr<Connection> Client::Impl::connect() {
  if (options_.sentinels.empty()) return std::make_unique<Connection>(options_, tls_.get(), description_);
  std::uint64_t generation = 0;
  std::optional<Address> known;
  std::size_t first = 0;
  {
    std::lock_guard guard(mutex_);
    generation = generation_;
    known = primary_;
    first = next_sentinel_ % options_.sentinels.size();
  }
  std::vector<std::string> failures;
  if (known) {
    try {
      return connect_primary(*known, generation);
    } catch (const AuthError&) {
      throw;
    } catch (const ConfigError&) {
      throw;
    } catch (const BackendError& e) {
      failures.push_back(e.what());
      forget_primary(generation);  // then ask the sentinels, now
      std::lock_guard guard(mutex_);
      generation = generation_;
    }
  }
  // Each sentinel in turn, until one names a server that answers ROLE
  // master: a sentinel that lags a failover does not hold the client back.
  for (std::size_t k = 0; k < options_.sentinels.size(); ++k) {
    const std::size_t i = (first + k) % options_.sentinels.size();
    const auto& sentinel = options_.sentinels[i];
    std::optional<Address> named;
    try {
      named = ask_sentinel(i);
    } catch (const BackendError& e) {
      failures.push_back(e.what());
      continue;
    }
    if (!named) {
      failures.push_back(fmt::format("sentinel {}:{}: does not know this master", sentinel.host, sentinel.port));
      continue;
    }
    try {
      auto connection = connect_primary(*named, generation);
      std::lock_guard guard(mutex_);
      next_sentinel_ = i;
      if (generation_ == generation) primary_ = named;
      return connection;
    } catch (const AuthError&) {
      throw;
    } catch (const ConfigError&) {
      throw;
    } catch (const BackendError& e) {
      failures.push_back(fmt::format("sentinel {}:{} named {}:{}: {}", sentinel.host, sentinel.port, named->first,
                                     named->second, e.what()));
    }
  }
  throw ConnectError(fmt::format("{}: no sentinel names a primary of {} that answers as one: {}", description_,
                                 options_.sentinel_master, fmt::join(failures, "; ")));
}

std::unique_ptr<Connection> Client::Impl::connect_primary(const Address& primary, std::uint64_t generation) {
  ClientOptions target = options_;
  target.host = primary.first;
  target.port = primary.second;
  std::unique_ptr<Connection> connection;
  try {
    connection = std::make_unique<Connection>(target, tls_.get(), description_);
  } catch (const ConnectError& e) {
    throw ConnectError(fmt::format("{} (the primary {}:{} named by the sentinels)", e.what(), target.host, target.port));
  }
  // The sentinels may lag a failover, or name a primary that was demoted
  // since: only a server that says it is the master will do.
  const Reply role = connection->command(std::vector<std::string>{"ROLE"});
  if (role.is_error("NOPERM")) {
    throw AuthError(fmt::format("{}: ROLE refused by {}:{} ({}): behind Sentinel the client checks the primary's role "
                                "after every connect; grant the user +role",
                                description_, target.host, target.port, role.text));
  }
  const std::string_view what = role.type == Reply::Type::array && !role.elements.empty() ? role.elements[0].text
                                                                                           : std::string_view(role.text);
  if (what != "master") {
    throw ConnectError(fmt::format("{}: {}:{}, named primary of {} by the sentinels, says ROLE {} (a failover in "
                                   "progress?)",
                                   description_, target.host, target.port, options_.sentinel_master,
                                   what.empty() ? to_string(role.type) : what));
  }
  connection->pool_generation = generation;
  return connection;
}

std::optional<Client::Impl::Address> Client::Impl::ask_sentinel(std::size_t index) {
  ClientOptions sentinel = options_;
  sentinel.sentinels.clear();
  sentinel.host = options_.sentinels[index].host;
  sentinel.port = options_.sentinels[index].port;
  sentinel.user = options_.sentinel_user;
  sentinel.password = options_.sentinel_password;
  sentinel.database = 0;
  const std::string where = fmt::format("sentinel {}:{}", sentinel.host, sentinel.port);
  Connection connection(sentinel, tls_.get(), where);
  const Reply reply =
      connection.command(std::vector<std::string>{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.sentinel_master});
  if (reply.type == Reply::Type::nil) return std::nullopt;
  if (reply.type == Reply::Type::array && reply.elements.size() == 2 && !reply.elements[0].text.empty()) {
    std::uint16_t port = 0;
    const std::string& text = reply.elements[1].text;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (error == std::errc{} && end == text.data() + text.size() && port != 0) return Address{reply.elements[0].text, port};
  }
  throw ConnectError(fmt::format("{}: {}", where, reply.is_error() ? reply.text : "an unexpected reply to SENTINEL "
                                                                                   "GET-MASTER-ADDR-BY-NAME"));
}

Reply Client::Impl::command(std::span<const std::string> args) {
  try {
    Lease connection(*this);
    commands_.fetch_add(1, std::memory_order_relaxed);
    Reply reply = connection->command(args);
    connection.check(reply);
    return reply;
  } catch (const BackendError&) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

Reply Client::Impl::command(std::initializer_list<std::string_view> args) {
  std::vector<std::string> owned(args.begin(), args.end());
  return command(owned);
}

std::vector<Reply> Client::Impl::pipeline(std::span<const std::vector<std::string>> commands) {
  if (commands.empty()) return {};
  try {
    Lease connection(*this);
    commands_.fetch_add(commands.size(), std::memory_order_relaxed);
    std::vector<Reply> replies = connection->pipeline(commands);
    for (const Reply& reply : replies) connection.check(reply);
    return replies;
  } catch (const BackendError&) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

void Client::Impl::ping() {
  const Reply reply = command({"PING"});
  if (reply.is_error()) throw AuthError(fmt::format("{}: PING refused: {}", description_, reply.text));
}

std::string Client::Impl::script_sha(const Script& script) {
  {
    std::lock_guard guard(script.mutex_);
    if (!script.sha_.empty()) return script.sha_;
  }
  const Reply reply = command(std::vector<std::string>{"SCRIPT", "LOAD", script.source_});
  // An error reply (NOAUTH, LOADING, NOPERM, …) leaves the SHA unknown: the
  // caller sends EVAL, whose reply then carries the same error as a result.
  if (reply.type != Reply::Type::string) return {};
  std::lock_guard guard(script.mutex_);
  script.sha_ = reply.text;
  return script.sha_;
}

Reply Client::Impl::eval(const Script& script, std::span<const std::string> keys, std::span<const std::string> args) {
  std::vector<std::vector<std::string>> calls(1);
  calls[0].assign(keys.begin(), keys.end());
  calls[0].insert(calls[0].end(), args.begin(), args.end());
  const std::size_t key_count = keys.size();
  return std::move(eval_pipeline(script, std::span<const std::size_t>(&key_count, 1), calls).front());
}

std::vector<Reply> Client::Impl::eval_pipeline(const Script& script, std::span<const std::size_t> key_counts,
                                         std::span<const std::vector<std::string>> calls) {
  if (calls.empty()) return {};
  if (key_counts.size() != calls.size()) {
    throw std::invalid_argument(fmt::format("eval_pipeline: {} key counts for {} calls", key_counts.size(), calls.size()));
  }
  const std::string sha = script_sha(script);
  auto build = [&](std::string_view verb, const std::string& body, std::size_t i) {
    std::vector<std::string> command;
    command.reserve(calls[i].size() + 3);
    command.emplace_back(verb);
    command.push_back(body);
    command.push_back(std::to_string(key_counts[i]));
    command.insert(command.end(), calls[i].begin(), calls[i].end());
    return command;
  };
  std::vector<std::vector<std::string>> commands;
  commands.reserve(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    commands.push_back(sha.empty() ? build("EVAL", script.source_, i) : build("EVALSHA", sha, i));
  }
  std::vector<Reply> replies = pipeline(commands);
  // NOSCRIPT means that call did not run: send those again with the source.
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].is_error("NOSCRIPT")) missing.push_back(i);
  }
  if (!missing.empty()) {
    commands.clear();
    for (const std::size_t i : missing) commands.push_back(build("EVAL", script.source_, i));
    std::vector<Reply> again = pipeline(commands);
    for (std::size_t k = 0; k < missing.size(); ++k) replies[missing[k]] = std::move(again[k]);
  }
  return replies;
}

}  // namespace fleetcron::redis
