#include "fleetcron/nats/uri.h"

#include <fmt/format.h>

#include <charconv>

#include "core/support/percent_decoding.h"
#include "fleetcron/duration.h"
#include "fleetcron/parse_error.h"

namespace fleetcron::nats {

namespace {

// One URI being parsed; every error names it with its secrets hidden.
class UriParser {
 public:
  explicit UriParser(std::string_view uri) : uri_(uri) {}

  UriOptions parse(ConnectionOptions base) {
    out_.connection = std::move(base);
    const std::size_t scheme_end = uri_.find("://");
    const std::string_view scheme = scheme_end == std::string_view::npos ? "" : uri_.substr(0, scheme_end);
    if (scheme != "nats" && scheme != "tls") fail("scheme", "expected nats:// or tls://");
    std::string_view rest = uri_.substr(scheme_end + 3);
    std::size_t at = scheme_end + 3;
    if (const auto last_at = rest.rfind('@'); last_at != std::string_view::npos) {
      parse_userinfo(at, rest.substr(0, last_at));
      at += last_at + 1;
      rest.remove_prefix(last_at + 1);
    }
    std::string_view query;
    if (const auto question = rest.find('?'); question != std::string_view::npos) {
      query = rest.substr(question + 1);
      rest = rest.substr(0, question);
    }
    parse_servers(std::string(scheme) + "://", rest);
    if (!query.empty()) parse_query(query);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::string_view part, std::string_view reason) const {
    throw UriError(fmt::format("NATS URI \"{}\": {}: {}", redacted(), part, reason));
  }

  // The URI with its user information hidden (all of it: a token, or a
  // password, may be anything).
  std::string redacted() const {
    const auto scheme_end = uri_.find("://");
    const auto last_at = uri_.rfind('@');
    if (scheme_end == std::string_view::npos || last_at == std::string_view::npos || last_at < scheme_end) {
      return std::string(uri_);
    }
    return std::string(uri_.substr(0, scheme_end + 3)) + "***" + std::string(uri_.substr(last_at));
  }

  std::string decode(std::string_view text, std::string_view part) const {
    std::size_t bad_at = 0;
    auto decoded = detail::percent_decode(text, bad_at);
    if (!decoded) fail(part, "invalid percent escape (expected %XX)");
    return std::move(*decoded);
  }

  void parse_userinfo(std::size_t, std::string_view userinfo) {
    if (userinfo.empty()) fail("user information", "empty before '@'");
    const auto colon = userinfo.find(':');
    auto& connection = out_.connection;
    if (colon == std::string_view::npos) {
      connection.token = decode(userinfo, "token");
      return;
    }
    connection.user = decode(userinfo.substr(0, colon), "user");
    connection.password = decode(userinfo.substr(colon + 1), "password");
    if (connection.user.empty()) fail("user", "empty (a token is written without ':')");
  }

  void parse_servers(const std::string& scheme, std::string_view hosts) {
    out_.connection.servers.clear();
    if (hosts.ends_with('/')) hosts.remove_suffix(1);  // nats://host:4222/ as nats.c takes it
    std::size_t start = 0;
    while (start <= hosts.size()) {
      const auto comma = std::min(hosts.find(',', start), hosts.size());
      const std::string_view host = hosts.substr(start, comma - start);
      if (host.empty()) fail("servers", "an empty server address");
      if (host.find('/') != std::string_view::npos) fail("servers", fmt::format("\"{}\" is not host[:port]", host));
      out_.connection.servers.push_back(scheme + std::string(host));
      start = comma + 1;
    }
  }

  void parse_query(std::string_view query) {
    std::size_t start = 0;
    while (start <= query.size()) {
      const auto amp = std::min(query.find('&', start), query.size());
      const std::string_view pair = query.substr(start, amp - start);
      const auto equals = pair.find('=');
      const std::string name(pair.substr(0, equals));
      const std::string value = equals == std::string_view::npos ? "" : std::string(pair.substr(equals + 1));
      if (value.empty()) fail("option " + name, "needs a value");
      apply_option(name, value);
      start = amp + 1;
    }
  }

  void apply_option(const std::string& name, const std::string& value) {
    if (name == "bucket") {
      out_.claim_bucket = value;
    } else if (name == "leader_bucket") {
      out_.leader_bucket = value;
    } else if (name == "key") {
      out_.leader_key = value;
    } else if (name == "replicas") {
      int replicas = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), replicas);
      if (error != std::errc{} || end != value.data() + value.size() || replicas < 1 || replicas > 5) {
        fail("option replicas", fmt::format("\"{}\" is not a number of replicas 1..5", value));
      }
      out_.replicas = replicas;
    } else if (name == "connect_timeout" || name == "request_timeout") {
      std::chrono::nanoseconds duration{};
      try {
        duration = parse_duration(value);
      } catch (const ParseError& e) {
        fail("option " + name, e.what());
      }
      (name == "connect_timeout" ? out_.connection.connect_timeout : out_.connection.request_timeout) =
          std::chrono::duration_cast<std::chrono::milliseconds>(duration);
    } else if (name == "tls_ca_file" || name == "tls_cert_file" || name == "tls_key_file") {
      // As the Redis URI names them; a file's path percent-decoded.
      auto& tls = out_.connection.tls;
      (name == "tls_ca_file" ? tls.ca_file : name == "tls_cert_file" ? tls.cert_file : tls.key_file) =
          decode(value, "option " + name);
      tls.enabled = true;
    } else {
      fail("option " + name, "unknown (known: bucket, leader_bucket, key, replicas, connect_timeout, request_timeout, "
                             "tls_ca_file, tls_cert_file, tls_key_file)");
    }
  }

  std::string_view uri_;
  UriOptions out_;
};

}  // namespace

UriOptions parse_uri(std::string_view uri, ConnectionOptions base) { return UriParser(uri).parse(std::move(base)); }

}  // namespace fleetcron::nats
