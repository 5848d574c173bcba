// parse_uri(), describe() and validate() for ClientOptions.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fleetcron/redis/uri.h"

#include "core/support/percent_decoding.h"
#include "fleetcron/duration.h"
#include "fleetcron/parse_error.h"

namespace fleetcron::redis {

namespace {

constexpr auto min_timeout = std::chrono::milliseconds{1};
constexpr auto max_timeout = std::chrono::hours{1};
constexpr std::size_t max_pool_size = 1024;

std::string quoted(std::string_view text) { return "\"" + quote_for_message(text) + "\""; }

/// Parses one URI, remembering where secrets are so messages can hide them.
class UriParser {
 public:
  UriParser(std::string_view uri, ClientOptions base) : uri_(uri), options_(std::move(base)) {}

  ClientOptions parse() {
    std::size_t at = 0;
    bool unix_socket = false;
    bool authority = true;
    if (uri_.starts_with("redis://")) {
      at = 8;
    } else if (uri_.starts_with("rediss://")) {
      at = 9;
      options_.tls = true;
    } else if (uri_.starts_with("redis-sentinel://")) {
      at = 17;
      sentinel_ = true;
    } else if (uri_.starts_with("rediss-sentinel://")) {
      at = 18;
      sentinel_ = true;
      options_.tls = true;
    } else if (uri_.starts_with("unix://")) {
      at = 7;
      unix_socket = true;
    } else if (uri_.starts_with("unix:")) {
      at = 5;
      unix_socket = true;
      authority = false;
    } else {
      // Not ours, but it may still carry a password: hide it in the message.
      const std::size_t slashes = uri_.find("://");
      mark_secrets(slashes == std::string_view::npos ? 0 : slashes + 3, true);
      fail(0, "scheme", "expected redis://, rediss://, redis-sentinel://, rediss-sentinel://, unix: or unix://");
    }
    mark_secrets(at, authority);
    const std::size_t query_at = std::min(uri_.find('?', at), uri_.size());
    const std::string_view rest = uri_.substr(at, query_at - at);
    if (unix_socket) {
      parse_unix(at, query_at, rest, authority);
    } else {
      parse_network(at, rest);
    }
    if (query_at < uri_.size()) parse_query(query_at + 1, uri_.substr(query_at + 1));
    try {
      validate(options_);
    } catch (const std::invalid_argument& e) {
      throw UriError(fmt::format("redis URI {}: {}", quoted(redacted()), e.what()));
    }
    return options_;
  }

 private:
  /// unix:PATH or unix://[user[:password]@]/PATH, from offset `at`; `rest`
  /// runs to the query at `query_at`.
  void parse_unix(std::size_t at, std::size_t query_at, std::string_view rest, bool authority) {
    std::size_t path_at = at;
    if (authority) {
      // unix://[user[:password]@]/path: an '@' after the first '/' is part of the path
      const std::size_t user_end = rest.substr(0, rest.find('/')).rfind('@');
      if (user_end != std::string_view::npos) {
        parse_userinfo(at, rest.substr(0, user_end));
        path_at = at + user_end + 1;
      }
    }
    const std::string_view path = uri_.substr(path_at, query_at - path_at);
    if (path.empty()) fail(path_at, "path", "missing socket path");
    options_.unix_socket = decode(path_at, path, "path");
  }

  /// [user[:password]@]host[:port][/db], or the sentinels and the master's
  /// name, from offset `at` to the query.
  void parse_network(std::size_t at, std::string_view rest) {
    const std::size_t slash = std::min(rest.find('/'), rest.size());
    std::string_view host_port = rest.substr(0, slash);
    std::size_t host_at = at;
    const std::size_t user_end = host_port.rfind('@');
    if (user_end != std::string_view::npos) {
      parse_userinfo(at, host_port.substr(0, user_end));
      host_at = at + user_end + 1;
      host_port = host_port.substr(user_end + 1);
    }
    options_.unix_socket.clear();
    if (sentinel_) {
      parse_sentinels(host_at, host_port);
      parse_master(at + slash + 1, slash < rest.size() ? rest.substr(slash + 1) : std::string_view{});
    } else {
      parse_host_port(host_at, host_port);
      if (slash < rest.size()) parse_database(at + slash + 1, rest.substr(slash + 1));
    }
  }

  [[noreturn]] void fail(std::size_t position, std::string_view part, std::string_view reason) const {
    throw UriError(fmt::format("redis URI {}: {} at offset {}: {}", quoted(redacted()), part,
                               redacted_offset(position), reason));
  }

  /// Before parsing, marks everything that may be a password, generously:
  /// from the first ':' after the scheme (or the scheme's end) to the last
  /// '@' (a password may hold unescaped '/', '?' or '@'), and the rest of
  /// the URI after any query option whose name contains "pass" (its value
  /// may hold '&'). Messages never show marked bytes.
  void mark_secrets(std::size_t scheme_end, bool authority) {
    if (authority) {
      const std::size_t last_at = uri_.rfind('@');
      if (last_at != std::string_view::npos && last_at >= scheme_end) {
        const std::size_t colon = uri_.find(':', scheme_end);
        secrets_.emplace_back(colon < last_at ? colon + 1 : scheme_end, last_at);
      }
    }
    const std::size_t query = uri_.find('?', scheme_end);
    for (std::size_t i = query; i != std::string_view::npos && i < uri_.size(); i = uri_.find('&', i + 1)) {
      const std::size_t name_end = std::min(uri_.find_first_of("=&", i + 1), uri_.size());
      std::string name(uri_.substr(i + 1, name_end - i - 1));
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      if (name.find("pass") != std::string::npos) {
        secrets_.emplace_back(std::min(name_end + 1, uri_.size()), uri_.size());
        break;
      }
    }
    // Sorted and merged, for redacted() and redacted_offset().
    std::sort(secrets_.begin(), secrets_.end());
    std::vector<std::pair<std::size_t, std::size_t>> merged;
    for (const auto& secret : secrets_) {
      if (secret.first >= secret.second) continue;
      if (!merged.empty() && secret.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, secret.second);
      } else {
        merged.push_back(secret);
      }
    }
    secrets_ = std::move(merged);
  }

  bool overlaps_secret(std::size_t begin, std::size_t end) const {
    return std::any_of(secrets_.begin(), secrets_.end(),
                       [&](const auto& secret) { return begin < secret.second && secret.first < std::max(end, begin + 1); });
  }

  /// `text` (which starts at offset `at`) quoted, or "***" if it touches a secret.
  std::string piece(std::size_t at, std::string_view text, bool quote = true) const {
    if (overlaps_secret(at, at + text.size())) return quote ? "\"***\"" : "***";
    return quote ? quoted(text) : quote_for_message(text);
  }

  std::string redacted() const {
    std::string out(uri_);
    for (auto it = secrets_.rbegin(); it != secrets_.rend(); ++it) out.replace(it->first, it->second - it->first, "***");
    return out;
  }

  /// Where `position` of the URI lands in redacted().
  std::size_t redacted_offset(std::size_t position) const {
    std::size_t removed = 0, added = 0;
    for (const auto& [begin, end] : secrets_) {
      if (position < begin) break;
      if (position < end) return begin - removed + added;  // inside a secret: point at its "***"
      removed += end - begin;
      added += 3;
    }
    return position - removed + added;
  }

  std::string decode(std::size_t at, std::string_view text, std::string_view part) const {
    std::size_t bad_at = 0;
    auto decoded = fleetcron::detail::percent_decode(text, bad_at);
    if (!decoded) {
      fail(at + bad_at, part,
           bad_at + 2 >= text.size() ? "incomplete percent escape (expected %XX)" : "invalid percent escape (expected %XX)");
    }
    return std::move(*decoded);
  }

  void parse_userinfo(std::size_t at, std::string_view userinfo) {
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // A lone word is a password in redis-cli's URI convention
      // (redis://secret@host); an ACL user needs user:password.
      if (userinfo.empty()) fail(at, "user", "empty user information before '@'");
      options_.user.clear();
      options_.password = decode(at, userinfo, "password");
      return;
    }
    if (colon + 1 == userinfo.size()) fail(at + colon + 1, "password", "empty password (leave out the ':')");
    options_.user = decode(at, userinfo.substr(0, colon), "user");
    options_.password = decode(at + colon + 1, userinfo.substr(colon + 1), "password");
  }

  void parse_host_port(std::size_t at, std::string_view text) {
    std::string_view host;
    std::size_t port_at = std::string_view::npos;
    if (text.starts_with('[')) {
      const std::size_t close = text.find(']');
      if (close == std::string_view::npos) fail(at, "host", "'[' without ']'");
      host = text.substr(1, close - 1);
      if (close + 1 < text.size()) {
        if (text[close + 1] != ':') fail(at + close + 1, "host", "expected ':' after ']'");
        port_at = close + 2;
      }
    } else {
      const std::size_t colon = text.find(':');
      if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
        fail(at, "host", "an IPv6 address needs brackets, e.g. redis://[::1]:6379");
      }
      host = text.substr(0, colon);
      if (colon != std::string_view::npos) port_at = colon + 1;
    }
    if (host.empty()) fail(at, "host", "missing host");
    options_.host = std::string(host);
    if (port_at != std::string_view::npos) {
      const std::string_view port = text.substr(port_at);
      const auto value = number(at + port_at, port, "port", 1, 65535);
      options_.port = static_cast<std::uint16_t>(value);
    }
  }

  /// host[:port],host[:port],…: the sentinels (port 26379 by default).
  void parse_sentinels(std::size_t at, std::string_view text) {
    options_.sentinels.clear();
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      options_.port = 26379;
      parse_host_port(at + start, text.substr(start, comma - start));
      options_.sentinels.push_back({options_.host, options_.port});
      if (comma == text.size()) break;
      start = comma + 1;
    }
    options_.host.clear();
    options_.port = 0;
  }

  /// MASTER[/db] after the sentinels.
  void parse_master(std::size_t at, std::string_view text) {
    const std::size_t slash = std::min(text.find('/'), text.size());
    if (slash == 0) fail(at, "master", "missing master name (redis-sentinel://host:26379,…/MASTER[/db])");
    options_.sentinel_master = decode(at, text.substr(0, slash), "master");
    if (slash < text.size()) parse_database(at + slash + 1, text.substr(slash + 1));
  }

  void parse_database(std::size_t at, std::string_view text) {
    if (text.empty()) return;  // "redis://host/" means the default database
    options_.database = static_cast<int>(number(at, text, "database", 0, std::numeric_limits<int>::max()));
  }

  long long number(std::size_t at, std::string_view text, std::string_view part, long long min, long long max) const {
    if (text.empty()) fail(at, part, "missing number");
    long long value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc::result_out_of_range) {
      fail(at, part, fmt::format("{} is out of range {}..{}", piece(at, text, false), min, max));
    }
    if (error != std::errc{} || end != text.data() + text.size() || text.front() == '-' || text.front() == '+') {
      fail(at + static_cast<std::size_t>(error != std::errc{} ? 0 : end - text.data()), part,
           fmt::format("expected a number, got {}", piece(at, text)));
    }
    if (value < min || value > max) fail(at, part, fmt::format("{} is out of range {}..{}", piece(at, text, false), min, max));
    return value;
  }

  std::chrono::milliseconds duration(std::size_t at, std::string_view text, std::string_view part) const {
    try {
      const auto value = parse_duration(text);
      return std::chrono::ceil<std::chrono::milliseconds>(value);
    } catch (const DurationError& e) {
      fail(at + e.position(), part, overlaps_secret(at, at + text.size()) ? "invalid duration" : e.what());
    }
  }

  void parse_query(std::size_t at, std::string_view query) {
    std::vector<std::string> seen;
    std::size_t start = 0;
    while (start <= query.size()) {
      const std::size_t end = std::min(query.find('&', start), query.size());
      const std::string_view pair = query.substr(start, end - start);
      const std::size_t pair_at = at + start;
      if (pair.empty()) fail(pair_at, "query", "empty option (stray '&' or '?')");
      const std::size_t equals = pair.find('=');
      if (equals == std::string_view::npos) {
        fail(pair_at, "query", fmt::format("option {} has no '=value'", piece(pair_at, pair)));
      }
      const std::string name(pair.substr(0, equals));
      const std::size_t value_at = pair_at + equals + 1;
      const std::string_view raw = pair.substr(equals + 1);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        fail(pair_at, "query", fmt::format("option {} given twice", piece(pair_at, name)));
      }
      seen.push_back(name);
      // command_timeout: the name this option had before it took NATS's.
      static constexpr std::string_view known[] = {
          "db",          "connect_timeout", "request_timeout", "command_timeout", "pool_size",       "password",
          "user",        "tls_ca_file",     "tls_ca_dir",      "tls_cert_file",   "tls_key_file",    "tls_server_name",
          "tls_verify",  "sentinel_user",   "sentinel_password"};
      if (std::find(std::begin(known), std::end(known), name) == std::end(known)) {
        fail(pair_at, "query",
             fmt::format("unknown option {} (known: db, connect_timeout, request_timeout, pool_size, password, user, "
                         "tls_ca_file, tls_ca_dir, tls_cert_file, tls_key_file, tls_server_name, tls_verify, sentinel_user, "
                         "sentinel_password)",
                         piece(pair_at, name)));
      }
      const std::string value = decode(value_at, raw, name);
      if (name.starts_with("tls_")) {
        if (!options_.tls) fail(pair_at, name, "a TLS option needs rediss:// or rediss-sentinel://");
        parse_tls_option(value_at, name, value);
      } else if (name.starts_with("sentinel_")) {
        if (!sentinel_) fail(pair_at, name, "a sentinel option needs redis-sentinel:// or rediss-sentinel://");
        if (value.empty()) fail(value_at, name, "empty value");
        (name == "sentinel_user" ? options_.sentinel_user : options_.sentinel_password) = value;
      } else if (name == "db") {
        options_.database = static_cast<int>(number(value_at, value, name, 0, std::numeric_limits<int>::max()));
      } else if (name == "connect_timeout") {
        options_.connect_timeout = duration(value_at, value, name);
      } else if (name == "request_timeout" || name == "command_timeout") {
        options_.request_timeout = duration(value_at, value, name);
      } else if (name == "pool_size") {
        options_.pool_size = static_cast<std::size_t>(number(value_at, value, name, 1, max_pool_size));
      } else if (name == "password") {
        if (value.empty()) fail(value_at, name, "empty password");
        options_.password = value;
      } else {  // user
        options_.user = value;
      }
      start = end + 1;
    }
  }

  void parse_tls_option(std::size_t at, const std::string& name, const std::string& value) {
    if (name == "tls_verify") {
      if (value != "true" && value != "false") fail(at, name, fmt::format("expected true or false, got {}", piece(at, value)));
      options_.tls_verify = value == "true";
      return;
    }
    if (value.empty()) fail(at, name, "empty value");
    if (name == "tls_ca_file") options_.tls_ca_file = value;
    if (name == "tls_ca_dir") options_.tls_ca_dir = value;
    if (name == "tls_cert_file") options_.tls_cert_file = value;
    if (name == "tls_key_file") options_.tls_key_file = value;
    if (name == "tls_server_name") options_.tls_server_name = value;
  }

  std::string_view uri_;
  bool sentinel_ = false;
  ClientOptions options_;
  std::vector<std::pair<std::size_t, std::size_t>> secrets_;  // [begin, end) that may hold passwords; sorted, disjoint
};

void check_duration(std::string_view field, std::chrono::milliseconds value) {
  if (value < min_timeout || value > max_timeout) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.{}: {} is out of range 1ms..1h", field,
                                            format_duration(value)));
  }
}

void validate_tls(const ClientOptions& options) {
  const std::pair<std::string_view, const std::string*> files[] = {{"tls_ca_file", &options.tls_ca_file},
                                                                   {"tls_ca_dir", &options.tls_ca_dir},
                                                                   {"tls_cert_file", &options.tls_cert_file},
                                                                   {"tls_key_file", &options.tls_key_file},
                                                                   {"tls_server_name", &options.tls_server_name}};
  for (const auto& [field, value] : files) {
    if (!options.tls && !value->empty()) {
      throw std::invalid_argument(fmt::format("redis::ClientOptions.{}: set, but tls is off (rediss://)", field));
    }
  }
  if (options.tls && !options.unix_socket.empty()) {
    throw std::invalid_argument("redis::ClientOptions.tls: Redis serves TLS on TCP only, not on unix_socket");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.{}: set without {} (a client certificate needs both)",
                                            options.tls_cert_file.empty() ? "tls_key_file" : "tls_cert_file",
                                            options.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file"));
  }
}

}  // namespace

bool is_redis_uri(std::string_view uri) noexcept {
  return uri.starts_with("redis://") || uri.starts_with("rediss://") || uri.starts_with("redis-sentinel://") ||
         uri.starts_with("rediss-sentinel://") || uri.starts_with("unix:");
}

UriOptions parse_uri(std::string_view uri, ClientOptions base) { return {UriParser(uri, std::move(base)).parse()}; }

void validate_sentinels(const ClientOptions& options) {
  if (options.sentinels.empty()) {
    const char* field = !options.sentinel_master.empty() ? "sentinel_master"
                        : !options.sentinel_user.empty() ? "sentinel_user"
                        : !options.sentinel_password.empty() ? "sentinel_password"
                                                             : nullptr;
    if (field != nullptr) {
      throw std::invalid_argument(fmt::format("redis::ClientOptions.{}: set, but there are no sentinels", field));
    }
    return;
  }
  if (!options.sentinel_user.empty() && options.sentinel_password.empty()) {
    throw std::invalid_argument("redis::ClientOptions.sentinel_user: set without sentinel_password (AUTH needs both)");
  }
  if (!options.unix_socket.empty()) {
    throw std::invalid_argument("redis::ClientOptions.sentinels: given with unix_socket (sentinels name TCP primaries)");
  }
  if (options.sentinel_master.empty()) throw std::invalid_argument("redis::ClientOptions.sentinel_master: empty");
  for (std::size_t i = 0; i < options.sentinels.size(); ++i) {
    if (options.sentinels[i].host.empty() || options.sentinels[i].port == 0) {
      throw std::invalid_argument(fmt::format("redis::ClientOptions.sentinels[{}]: empty host or port 0", i));
    }
  }
  if (options.sentinels.size() > 64) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.sentinels: {} of them, at most 64", options.sentinels.size()));
  }
}

void validate(const ClientOptions& options) {
  validate_sentinels(options);
  const bool direct = options.unix_socket.empty() && options.sentinels.empty();
  if (direct && options.host.empty()) throw std::invalid_argument("redis::ClientOptions.host: empty (and no unix_socket)");
  if (direct && options.port == 0) throw std::invalid_argument("redis::ClientOptions.port: 0");
  if (options.database < 0) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.database: {} is negative", options.database));
  }
  check_duration("connect_timeout", options.connect_timeout);
  check_duration("request_timeout", options.request_timeout);
  check_duration("reconnect_backoff_initial", options.reconnect_backoff_initial);
  check_duration("reconnect_backoff_max", options.reconnect_backoff_max);
  if (options.reconnect_backoff_max < options.reconnect_backoff_initial) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.reconnect_backoff_max: {} is below "
                                            "reconnect_backoff_initial {}",
                                            format_duration(options.reconnect_backoff_max),
                                            format_duration(options.reconnect_backoff_initial)));
  }
  if (options.pool_size < 1 || options.pool_size > max_pool_size) {
    throw std::invalid_argument(fmt::format("redis::ClientOptions.pool_size: {} is out of range 1..{}",
                                            options.pool_size, max_pool_size));
  }
  validate_tls(options);
}

std::string describe(const ClientOptions& options) {
  std::string userinfo;
  if (!options.user.empty() || !options.password.empty()) {
    userinfo = options.user + (options.password.empty() ? "" : ":***") + "@";
  }
  if (!options.unix_socket.empty()) {
    std::string out = userinfo.empty() ? "unix:" + options.unix_socket : "unix://" + userinfo + options.unix_socket;
    if (options.database != 0) out += fmt::format("?db={}", options.database);
    return out;
  }
  const auto address = [](const std::string& host, std::uint16_t port) {
    return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  };
  std::string out;
  if (!options.sentinels.empty()) {
    std::vector<std::string> sentinels;
    for (const auto& sentinel : options.sentinels) sentinels.push_back(address(sentinel.host, sentinel.port));
    out = fmt::format("{}://{}{}/{}/{}", options.tls ? "rediss-sentinel" : "redis-sentinel", userinfo,
                      fmt::join(sentinels, ","), options.sentinel_master, options.database);
  } else {
    out = fmt::format("{}://{}{}/{}", options.tls ? "rediss" : "redis", userinfo, address(options.host, options.port),
                      options.database);
  }
  if (options.tls && !options.tls_verify) out += "?tls_verify=false";
  return out;
}

}  // namespace fleetcron::redis
