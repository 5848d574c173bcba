// parse_uri(), describe() and validate(): no server needed.
#include <gtest/gtest.h>

#include "fleetcron/redis/client.h"

namespace fleetcron::redis {
namespace {

using namespace std::chrono_literals;

TEST(RedisUri, HostPortDatabaseAndUserinfo) {
  const auto plain = parse_uri("redis://localhost").connection;
  EXPECT_EQ(plain.host, "localhost");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_EQ(plain.database, 0);
  EXPECT_TRUE(plain.password.empty());

  const auto full = parse_uri("redis://alice:s%40cret@10.0.0.5:6380/3").connection;
  EXPECT_EQ(full.user, "alice");
  EXPECT_EQ(full.password, "s@cret");
  EXPECT_EQ(full.host, "10.0.0.5");
  EXPECT_EQ(full.port, 6380);
  EXPECT_EQ(full.database, 3);

  const auto password_only = parse_uri("redis://:hunter2@h").connection;
  EXPECT_EQ(password_only.user, "");
  EXPECT_EQ(password_only.password, "hunter2");
  const auto lone_word = parse_uri("redis://hunter2@h").connection;  // redis-cli: a lone word is the password
  EXPECT_EQ(lone_word.user, "");
  EXPECT_EQ(lone_word.password, "hunter2");

  const auto at_in_path = parse_uri("unix:///run/redis@main.sock").connection;  // '@' after the first '/' is in the path
  EXPECT_EQ(at_in_path.unix_socket, "/run/redis@main.sock");
  EXPECT_TRUE(at_in_path.password.empty());

  const auto ipv6 = parse_uri("redis://[::1]:7000/").connection;
  EXPECT_EQ(ipv6.host, "::1");
  EXPECT_EQ(ipv6.port, 7000);
  EXPECT_EQ(describe(ipv6), "redis://[::1]:7000/0");
}

TEST(RedisUri, UnixSocketsAndQueryOptions) {
  const auto socket = parse_uri("unix:/run/redis.sock?db=2&command_timeout=250ms").connection;
  EXPECT_EQ(socket.unix_socket, "/run/redis.sock");
  EXPECT_EQ(socket.database, 2);
  EXPECT_EQ(socket.request_timeout, 250ms);
  EXPECT_EQ(describe(socket), "unix:/run/redis.sock?db=2");

  const auto with_user = parse_uri("unix://bob:pw@/tmp/r.sock?pool_size=8&connect_timeout=2s").connection;
  EXPECT_EQ(with_user.unix_socket, "/tmp/r.sock");
  EXPECT_EQ(with_user.user, "bob");
  EXPECT_EQ(with_user.password, "pw");
  EXPECT_EQ(with_user.pool_size, 8u);
  EXPECT_EQ(with_user.connect_timeout, 2s);
  EXPECT_EQ(describe(with_user), "unix://bob:***@/tmp/r.sock");

  ClientOptions base;
  base.request_timeout = 3s;
  EXPECT_EQ(parse_uri("redis://h", base).connection.request_timeout, 3s);  // the base fills what the URI leaves out
}

TEST(RedisUri, TlsSchemeAndOptions) {
  const auto tls = parse_uri(
      "rediss://u:pw@cache.example:6380/2?tls_ca_file=/etc/ca.pem&tls_cert_file=/c.pem&tls_key_file=/k.pem"
      "&tls_server_name=redis.internal").connection;
  EXPECT_TRUE(tls.tls);
  EXPECT_TRUE(tls.tls_verify);
  EXPECT_EQ(tls.tls_ca_file, "/etc/ca.pem");
  EXPECT_EQ(tls.tls_cert_file, "/c.pem");
  EXPECT_EQ(tls.tls_key_file, "/k.pem");
  EXPECT_EQ(tls.tls_server_name, "redis.internal");
  EXPECT_EQ(describe(tls), "rediss://u:***@cache.example:6380/2");
  EXPECT_FALSE(parse_uri("redis://h").connection.tls);

  // Turning verification off is explicit, and shows in every message.
  const auto unverified = parse_uri("rediss://h?tls_verify=false&tls_ca_dir=/etc/ssl/certs").connection;
  EXPECT_FALSE(unverified.tls_verify);
  EXPECT_EQ(unverified.tls_ca_dir, "/etc/ssl/certs");
  EXPECT_EQ(describe(unverified), "rediss://h:6379/0?tls_verify=false");

  EXPECT_TRUE(is_redis_uri("rediss://h"));
  EXPECT_TRUE(is_redis_uri("unix:/run/redis.sock"));
  EXPECT_FALSE(is_redis_uri("nats://h"));

  ClientOptions options;
  options.tls_ca_file = "/ca.pem";
  EXPECT_THROW(validate(options), std::invalid_argument);  // a TLS option without tls
  options.tls = true;
  options.unix_socket = "/run/redis.sock";
  EXPECT_THROW(validate(options), std::invalid_argument);  // TLS on a Unix socket
}

TEST(RedisUri, SentinelsMasterAndTheirOwnCredentials) {
  const auto options = parse_uri(
      "redis-sentinel://:primary-secret@10.0.0.1,10.0.0.2:26380,[::1]:5000/fleet/3?sentinel_password=s3&sentinel_user=sen").connection;
  ASSERT_EQ(options.sentinels.size(), 3u);
  EXPECT_EQ(options.sentinels[0].host, "10.0.0.1");
  EXPECT_EQ(options.sentinels[0].port, 26379);
  EXPECT_EQ(options.sentinels[1].port, 26380);
  EXPECT_EQ(options.sentinels[2].host, "::1");
  EXPECT_EQ(options.sentinels[2].port, 5000);
  EXPECT_EQ(options.sentinel_master, "fleet");
  EXPECT_EQ(options.database, 3);
  EXPECT_EQ(options.password, "primary-secret");
  EXPECT_EQ(options.sentinel_user, "sen");
  EXPECT_EQ(options.sentinel_password, "s3");
  EXPECT_FALSE(options.tls);
  EXPECT_EQ(describe(options), "redis-sentinel://:***@10.0.0.1:26379,10.0.0.2:26380,[::1]:5000/fleet/3");
  const auto tls = parse_uri("rediss-sentinel://s1/fleet?tls_ca_file=/ca.pem").connection;
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.database, 0);
  EXPECT_EQ(describe(tls), "rediss-sentinel://s1:26379/fleet/0");
  EXPECT_TRUE(is_redis_uri("redis-sentinel://s1/fleet"));
}

TEST(RedisUri, ErrorsNamePartAndOffsetAndHideThePassword) {
  struct Case {
    const char* uri;
    const char* message;
  };
  const Case cases[] = {
      {"http://h", "redis URI \"http://h\": scheme at offset 0: expected redis://, rediss://, redis-sentinel://, rediss-sentinel://, unix: or unix://"},
      {"redis://h?tls_ca_file=/ca.pem", "tls_ca_file at offset 10: a TLS option needs rediss://"},
      {"rediss://h?tls_verify=no", "tls_verify at offset 22: expected true or false, got \"no\""},
      {"rediss://h?tls_ca_file=", "tls_ca_file at offset 23: empty value"},
      {"rediss://h?tls_cert_file=/c.pem", "tls_cert_file: set without tls_key_file"},
      {"redis-sentinel://s1,s2", "master at offset 23: missing master name"},
      {"redis-sentinel://s1,/m", "host at offset 20: missing host"},
      {"redis-sentinel://s1:0/m", "port at offset 20: 0 is out of range 1..65535"},
      {"redis://h?sentinel_user=x", "sentinel_user at offset 10: a sentinel option needs redis-sentinel://"},
      {"redis-sentinel://s1/m?sentinel_password=top-secret&x=1", "redis URI \"redis-sentinel://s1/m?sentinel_password=***\""},
      {"redis://", "host at offset 8: missing host"},
      {"redis://h:0", "port at offset 10: 0 is out of range 1..65535"},
      {"redis://h:99999", "port at offset 10: 99999 is out of range 1..65535"},
      {"redis://h:12a", "port at offset 12: expected a number, got \"12a\""},
      {"redis://h/x", "database at offset 10: expected a number, got \"x\""},
      {"redis://::1:6379", "host at offset 8: an IPv6 address needs brackets"},
      {"redis://[::1", "host at offset 8: '[' without ']'"},
      {"redis://u:secret@h:70000", "redis URI \"redis://u:***@h:70000\": port at offset 16: 70000 is out of range"},
      {"redis://u:pa%zzss@h", "redis URI \"redis://u:***@h\": password at offset 10: invalid percent escape"},
      {"redis://u:@h", "password at offset 10: empty password"},
      {"redis://h?pool_size=0", "pool_size at offset 20: 0 is out of range 1..1024"},
      {"redis://h?command_timeout=soon", "command_timeout at offset 26: "},
      {"redis://h?command_timeout=0s", "redis::ClientOptions.request_timeout: 0s is out of range 1ms..1h"},
      {"redis://h?request_timeout=0s", "redis::ClientOptions.request_timeout: 0s is out of range 1ms..1h"},
      {"redis://h?colour=red", "query at offset 10: unknown option \"colour\""},
      {"redis://h?db=1&db=2", "query at offset 15: option \"db\" given twice"},
      {"redis://h?db", "query at offset 10: option \"db\" has no '=value'"},
      // Everything after a password option is hidden: the value may hold '&'.
      {"redis://h?password=topsecret&x=1", "redis URI \"redis://h?password=***\": query at offset 19: unknown option \"***\""},
      {"unix:", "path at offset 5: missing socket path"},
      // Regression (found by redis_uri_fuzz): a bad escape in the user part
      // quoted the URI before the password was marked secret.
      {"redis://us%zzer:secret-password@h", "redis URI \"redis://us%zzer:***@h\": user at offset 10: invalid percent"},
      {"redis://se%zzcret@h", "redis URI \"redis://***@h\": password at offset 8: invalid percent"},
      // Review findings: a password holding '/', '?' or '&', a misspelt
      // password option, a TLS URI: never echoed.
      {"redis://u:pa/ss@h", "redis URI \"redis://u:***@h\": port at offset 10: expected a number, got \"***\""},
      {"redis://u:se?cret@h", "redis URI \"redis://u:***@h\":"},
      {"redis://h?password=ab&cd", "redis URI \"redis://h?password=***\": query at offset 19: option \"***\" has no"},
      {"redis://h?Passwd=secret-x", "redis URI \"redis://h?Passwd=***\": query at offset 10: unknown option \"Passwd\""},
      {"rediss://u:secret@h:x", "redis URI \"rediss://u:***@h:x\": port at offset 17: expected a number"},
      {"redis://a:secret@h:1:2?password=other-secret", "redis URI \"redis://a:***@h:1:2?password=***\": host at offset 14: an IPv6"},
  };
  for (const auto& c : cases) {
    try {
      (void)parse_uri(c.uri);
      ADD_FAILURE() << c.uri << " parsed";
    } catch (const UriError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.uri << "\n  got: " << e.what();
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("cret"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("pa/ss"), std::string::npos) << e.what();
    }
  }
}

TEST(RedisClientOptions, ValidateNamesTheField) {
  ClientOptions options;
  options.pool_size = 0;
  EXPECT_THROW(
      {
        try {
          validate(options);
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "redis::ClientOptions.pool_size: 0 is out of range 1..1024");
          throw;
        }
      },
      std::invalid_argument);
  options = {};
  options.reconnect_backoff_initial = 5s;
  options.reconnect_backoff_max = 1s;
  EXPECT_THROW(validate(options), std::invalid_argument);
  options = {};
  options.host.clear();
  EXPECT_THROW(Client{options}, std::invalid_argument);
  options = {};
  options.password = "p";
  options.user = "u";
  EXPECT_EQ(describe(options), "redis://u:***@127.0.0.1:6379/0");
}

}  // namespace
}  // namespace fleetcron::redis
