#include "postgres_server.h"

#include "support/child_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>

namespace fleetcron::test {

namespace {

// The command's standard output; throws with it if the command fails.
std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  std::array<char, 4096> buffer{};
  while (const std::size_t got = fread(buffer.data(), 1, buffer.size(), pipe.get())) out.append(buffer.data(), got);
  const int status = pclose(pipe.release());
  if (status != 0) throw std::runtime_error("failed (" + std::to_string(status) + "): " + command + "\n" + out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

const std::string cluster_script = std::string(FLEETCRON_SOURCE_DIR) + "/scripts/postgres_cluster.sh";

}  // namespace

PostgresServer::PostgresServer() {
  char pattern[] = "/tmp/fleetcron-pgtest.XXXXXX";
  if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    try {
      start();
      return;
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }
  throw std::runtime_error("PostgreSQL did not start: " + last_error);
}

PostgresServer::~PostgresServer() {
  try {
    stop();
    (void)run("rm -rf '" + dir_ + "'");
  } catch (...) {
  }
}

void PostgresServer::start() {
  (void)run("bash '" + cluster_script + "' start '" + dir_ + "' " + std::to_string(port_) + " 2>&1");
}
void PostgresServer::stop() { (void)run("bash '" + cluster_script + "' stop '" + dir_ + "' 2>&1"); }

std::string PostgresServer::uri() const {
  return "postgres://fleetcron:fleetcron-test@127.0.0.1:" + std::to_string(port_) + "/postgres";
}

std::string shared_postgres_uri() {
  if (const char* given = std::getenv("FLEETCRON_TEST_POSTGRES_URL"); given && *given) return given;
  static PostgresServer server;
  return server.uri();
}

postgres::TableNames unique_tables() {
  static std::atomic<int> counter{0};
  static const auto run_id = std::random_device{}() % 1000000;
  const std::string base = "t" + std::to_string(counter++) + "_" + std::to_string(run_id) + "_";
  return postgres::TableNames{.claims = base + "claims", .leader = base + "leader", .fleet_prefix = base + "fleet_"};
}

std::string psql(const std::string& uri, const std::string& sql) {
  std::string quoted;
  for (const char c : sql) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return run("psql -X -A -t -q -F '|' -v ON_ERROR_STOP=1 '" + uri + "' -c '" + quoted + "' 2>&1");
}

}  // namespace fleetcron::test
