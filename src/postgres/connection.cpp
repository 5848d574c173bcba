#include "fleetcron/postgres/connection.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "postgres/pool.h"

namespace fleetcron::postgres {

namespace {

// libpq's own parse of the URI: the parameters it sets, or the reason it cannot.
struct Parsed {
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> options{nullptr, PQconninfoFree};
  std::string error;
  [[nodiscard]] std::string value(std::string_view keyword) const {
    for (const PQconninfoOption* option = options.get(); option && option->keyword; ++option) {
      if (keyword == option->keyword && option->val) return option->val;
    }
    return {};
  }
};

Parsed parse(const std::string& uri) {
  Parsed out;
  char* error = nullptr;
  out.options.reset(PQconninfoParse(uri.c_str(), &error));
  if (error) {
    out.error = error;
    PQfreemem(error);
    while (!out.error.empty() && out.error.back() == '\n') out.error.pop_back();
  }
  return out;
}

void check_bound(std::string_view name, std::chrono::milliseconds value) {
  if (value < std::chrono::milliseconds{1} || value > std::chrono::hours{1}) {
    throw std::invalid_argument(
        fmt::format("postgres::ConnectionOptions.{}: {} ms is out of range 1 ms .. 1 h", name, value.count()));
  }
}

}  // namespace

namespace detail {

std::string without_secrets(std::string text, std::string_view uri) {
  std::vector<std::string> secrets;
  const auto scheme = uri.find("://");
  // The user information ends at the last '@' before the query: a password
  // may hold an unencoded '/', '?' or '@'.
  const auto query = uri.find('?', uri.rfind('@') == std::string_view::npos ? 0 : uri.rfind('@'));
  const auto at = uri.substr(0, query).rfind('@');
  if (scheme != std::string_view::npos && at != std::string_view::npos && at > scheme) {
    const std::string_view userinfo = uri.substr(scheme + 3, at - scheme - 3);
    const auto colon = userinfo.find(':');
    if (colon != std::string_view::npos && colon + 1 < userinfo.size()) secrets.emplace_back(userinfo.substr(colon + 1));
  }
  for (auto found = uri.find("password="); found != std::string_view::npos; found = uri.find("password=", found + 1)) {
    const auto begin = found + std::string_view("password=").size();
    const auto end = uri.find('&', begin);
    const std::string_view value = uri.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    if (!value.empty()) secrets.emplace_back(value);
  }
  for (const std::string& secret : secrets) {
    for (auto found = text.find(secret); found != std::string::npos; found = text.find(secret, found + 3)) {
      text.replace(found, secret.size(), "***");
    }
  }
  return text;
}

}  // namespace detail

void validate(const ConnectionOptions& options) {
  if (!options.uri.starts_with("postgres://") && !options.uri.starts_with("postgresql://")) {
    throw std::invalid_argument(
        "postgres::ConnectionOptions.uri: expected postgres://… or postgresql://… (libpq's URI form)");
  }
  const Parsed parsed = parse(options.uri);
  if (!parsed.options) {
    // libpq's message quotes the part it refused, which may be the password.
    throw std::invalid_argument(
        fmt::format("postgres::ConnectionOptions.uri: {}", detail::without_secrets(parsed.error, options.uri)));
  }
  check_bound("connect_timeout", options.connect_timeout);
  check_bound("statement_timeout", options.statement_timeout);
  if (options.pool_size < 1 || options.pool_size > 64) {
    throw std::invalid_argument(
        fmt::format("postgres::ConnectionOptions.pool_size: {} is out of range 1 .. 64", options.pool_size));
  }
}

std::string describe(const ConnectionOptions& options) {
  const Parsed parsed = parse(options.uri);
  if (!parsed.options) return "postgres://(invalid URI)";
  const std::string user = parsed.value("user");
  std::string host = parsed.value("host");
  if (host.empty()) host = parsed.value("hostaddr");
  if (host.empty()) host = "localhost";
  const std::string port = parsed.value("port");
  std::string out = fmt::format("postgres://{}{}{}{}/{}", user.empty() ? "" : user + "@", host, port.empty() ? "" : ":",
                                port, parsed.value("dbname"));
  if (const std::string mode = parsed.value("sslmode"); !mode.empty()) out += "?sslmode=" + mode;
  return out;
}

Connection::Connection(ConnectionOptions options) : options_(std::move(options)) {
  validate(options_);
  description_ = postgres::describe(options_);
  pool_ = std::make_unique<detail::Pool>(options_, description_);
}

Connection::~Connection() = default;
const ConnectionOptions& Connection::options() const noexcept { return options_; }
const std::string& Connection::describe() const noexcept { return description_; }
void Connection::ping() { (void)pool_->exec("SELECT 1"); }
detail::Pool& Connection::pool() noexcept { return *pool_; }

}  // namespace fleetcron::postgres
