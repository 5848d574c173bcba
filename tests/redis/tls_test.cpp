// Redis over TLS against real redis-server processes listening on
// --tls-port, with certificates made by tests/support/tls_certificates.sh
// (openssl): a trusted server, a wrong CA, an expired certificate, a wrong
// name and a server that requires client certificates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "fleetcron/coordination.h"
#include "fleetcron/redis/claimer.h"
#include "redis/commands.h"
#include "redis_server.h"
#include "support/pace_probe.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

/// The certificates, made once per test process in a fresh directory.
const std::string& certificates() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/fleetcron-tls.XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    const std::string command = std::string("bash ") + FLEETCRON_TESTS_DIR + "/support/tls_certificates.sh " + pattern;
    if (std::system(command.c_str()) != 0) throw std::runtime_error("tls_certificates.sh failed: " + command);
    return std::string(pattern);
  }();
  return dir;
}

/// A redis-server serving TLS on tls_port() with `certificate` (server or
/// expired), beside its plaintext port (which the test support uses to see
/// that it is ready).
class TlsServer {
 public:
  explicit TlsServer(const std::string& certificate = "server", const std::string& auth_clients = "optional")
      : tls_port_(test::free_port()),
        server_(test::RedisServer::Options{
            .extra_args = {"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                           certificates() + "/" + certificate + ".pem", "--tls-key-file",
                           certificates() + "/" + certificate + ".key", "--tls-ca-cert-file",
                           certificates() + "/ca.pem", "--tls-auth-clients", auth_clients}}) {}

  [[nodiscard]] std::uint16_t tls_port() const noexcept { return tls_port_; }
  test::RedisServer& server() noexcept { return server_; }

  /// Options for rediss://host:tls_port trusting `ca` (a file name in the
  /// certificates directory).
  [[nodiscard]] ClientOptions options(const std::string& ca = "ca.pem", const std::string& host = "127.0.0.1") const {
    ClientOptions options;
    options.host = host;
    options.port = tls_port_;
    options.tls = true;
    options.tls_ca_file = certificates() + "/" + ca;
    options.connect_timeout = 2s;
    options.request_timeout = 2s;
    return options;
  }

 private:
  std::uint16_t tls_port_;
  test::RedisServer server_;
};

std::string now_key() {
  return fire_key("report", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
}

/// The refusal of a connection the configuration cannot make (a
/// ConfigError: the daemon exits 2 on it at start, not retried as an outage).
std::string refusal(const ClientOptions& options) {
  Client client(options);
  try {
    client.ping();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const BackendError& e) {
    return std::string("(not a ConfigError) ") + e.what();
  }
  return "(connected)";
}

TEST(RedisTls, CommandsPipelinesAndClaimsRunOverAVerifiedConnection) {
  TlsServer tls;
  for (const std::string host : {"127.0.0.1", "localhost"}) {  // an IP SAN, then a DNS SAN
    auto client = std::make_shared<Client>(tls.options("ca.pem", host));
    client->ping();
    // Big values and a long pipeline: writes and reads span many TLS records.
    const std::string big(300'000, 'x');
    client->impl().command({"SET", "big", big});
    EXPECT_EQ(client->impl().command({"GET", "big"}).text, big);
    std::vector<std::vector<std::string>> commands;
    for (int i = 0; i < 2000; ++i) commands.push_back({"INCR", "counter:" + host});
    const auto replies = client->impl().pipeline(commands);
    ASSERT_EQ(replies.size(), 2000u);
    EXPECT_EQ(replies.back().integer, 2000);
    EXPECT_EQ(client->describe(), "rediss://" + std::string(host) + ":" + std::to_string(tls.tls_port()) + "/0");

    const std::string prefix = test::unique_prefix();
    test::seed_store_epoch(tls.server().uri(), prefix);
    Claimer claimer(client, {.claim_prefix = prefix});
    const auto key = now_key();
    EXPECT_EQ(claimer.claim(key).status, ClaimResult::Status::claimed);
    EXPECT_EQ(claimer.claim(key).status, ClaimResult::Status::already_claimed);
  }
}

TEST(RedisTls, AnUntrustedExpiredOrMisnamedCertificateIsRefusedWithItsReason) {
  TlsServer tls;
  TlsServer expired("expired");
  const std::string wrong_ca = refusal(tls.options("other-ca.pem"));
  // The server sends its chain with the CA: OpenSSL names the root it does not trust.
  EXPECT_EQ(wrong_ca.find("rediss://"), 0u) << wrong_ca;
  EXPECT_NE(wrong_ca.find("TLS: the server's certificate is refused: self-signed certificate in certificate chain"),
            std::string::npos)
      << wrong_ca;
  EXPECT_NE(wrong_ca.find("other-ca.pem"), std::string::npos) << wrong_ca;

  const std::string old = refusal(expired.options());
  EXPECT_EQ(old.find("rediss://"), 0u) << old;
  EXPECT_NE(old.find("certificate is refused: certificate has expired"), std::string::npos) << old;

  auto misnamed = tls.options();
  misnamed.tls_server_name = "cache.example";
  const std::string name = refusal(misnamed);
  EXPECT_EQ(name.find("rediss://"), 0u) << name;
  EXPECT_NE(name.find("certificate is refused: hostname mismatch (expected name cache.example,"), std::string::npos) << name;

  // Turning verification off accepts all three: it has to be asked for.
  for (auto options : {tls.options("other-ca.pem"), expired.options(), misnamed}) {
    options.tls_verify = false;
    Client client(options);
    EXPECT_NO_THROW(client.ping()) << client.describe();
    EXPECT_TRUE(client.describe().ends_with("?tls_verify=false"));
  }
}

TEST(RedisTls, AClaimerBehindARefusedCertificateFailsClosed) {
  TlsServer tls;
  auto client = std::make_shared<Client>(tls.options("other-ca.pem"));
  Claimer claimer(client, {.claim_prefix = test::unique_prefix()});
  const auto result = claimer.claim(now_key());
  EXPECT_EQ(result.status, ClaimResult::Status::error);
  EXPECT_NE(result.error.find("certificate is refused: self-signed certificate in certificate chain"), std::string::npos) << result.error;
  EXPECT_EQ(client->stats().connects, 0u);
}

TEST(RedisTls, AServerThatRequiresAClientCertificateGetsOne) {
  TlsServer tls("server", "yes");
  auto options = tls.options();
  {
    Client client(options);
    EXPECT_THROW(client.ping(), BackendError);  // refused in the handshake or at the first read (TLS 1.3)
  }
  options.tls_cert_file = certificates() + "/client.pem";
  options.tls_key_file = certificates() + "/client.key";
  Client client(options);
  EXPECT_NO_THROW(client.ping());
}

TEST(RedisTls, UnreadableFilesAreRefusedAtConstructionNamingTheOption) {
  TlsServer tls;
  auto options = tls.options("missing.pem");
  try {
    Client client(options);
    FAIL() << "constructed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("redis::ClientOptions.tls_ca_file " + certificates() + "/missing.pem: cannot "
                                         "load the CAs"),
              std::string::npos)
        << e.what();
  }
  options = tls.options();
  options.tls_cert_file = certificates() + "/client.pem";
  options.tls_key_file = certificates() + "/server.key";  // another key
  try {
    Client client(options);
    FAIL() << "constructed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tls_key_file " + certificates() + "/server.key: cannot load the private key"),
              std::string::npos)
        << e.what();
  }
}

TEST(RedisTls, TimeoutsBoundTheHandshakeAndEveryCommand) {
  TlsServer tls;
  auto options = tls.options();
  options.connect_timeout = 300ms;
  options.request_timeout = 300ms;
  Client client(options);
  client.ping();
  tls.server().pause();  // the kernel still accepts TCP; nobody answers
  const test::PaceProbe started;
  try {
    client.ping();
    FAIL() << "a paused server answered";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("no reply within the request timeout"), std::string::npos) << e.what();
  }
  Client fresh(options);
  try {
    fresh.ping();
    FAIL() << "a paused server finished a handshake";
  } catch (const ConnectError& e) {
    EXPECT_NE(std::string(e.what()).find("TLS handshake timed out"), std::string::npos) << e.what();
  }
  // Two bounded waits, not a hang (a generous bound: this is no benchmark).
  EXPECT_TRUE(started.within(10s)) << started.describe(10s);
  tls.server().resume();
}

TEST(RedisTls, APooledConnectionIsReplacedAfterTheServerRestarts) {
  TlsServer tls;
  auto options = tls.options();
  options.reconnect_backoff_initial = 1ms;
  options.reconnect_backoff_max = 1ms;
  Client client(options);
  client.ping();
  tls.server().stop();
  tls.server().start();
  EXPECT_THROW(client.ping(), BackendError);  // the pooled connection's server is gone
  EXPECT_NO_THROW(client.ping());             // a new connection, a new handshake
  EXPECT_EQ(client.stats().connects, 2u);
}

}  // namespace
}  // namespace fleetcron::redis
