#include "nats_server.h"

#include "support/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <stdexcept>
#include <thread>

namespace fleetcron::test {

NatsServer::NatsServer(Options options) : options_(std::move(options)) {
  char pattern[] = "/tmp/fleetcron-test-nats-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  launch(true);
}

NatsServer::~NatsServer() {
  resume();  // a stopped process would not see SIGTERM
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void NatsServer::launch(bool any_port) {
  const std::string ports_dir = dir_ + "/ports";
  std::filesystem::remove_all(ports_dir);
  std::filesystem::create_directories(ports_dir);
  std::vector<std::string> args{"nats-server", "-js", "-a", "127.0.0.1", "-p", any_port ? "-1" : std::to_string(port_),
                                "-sd", dir_ + "/store", "--ports_file_dir", ports_dir};
  if (!options_.user.empty()) {
    args.insert(args.end(), {"--user", options_.user, "--pass", options_.password});
  }
  if (!options_.config.empty()) {
    const std::string path = dir_ + "/server.conf";
    std::ofstream(path) << options_.config;
    args.insert(args.end(), {"-c", path});
  }
  pid_ = spawn_process(args, dir_ + "/server.log");
  // The server writes its port to nats-server_<pid>.ports once it listens:
  // that file proves the port is this process's.
  const std::string ports_file = ports_dir + "/nats-server_" + std::to_string(pid_) + ".ports";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{15};
  const std::regex url(R"(nats://127\.0\.0\.1:(\d+))");
  while (std::chrono::steady_clock::now() < deadline) {
    if (has_exited(pid_)) {
      pid_ = -1;
      throw std::runtime_error("nats-server exited at start-up; see " + dir_ + "/server.log");
    }
    std::ifstream in(ports_file);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    std::smatch match;
    if (std::regex_search(text, match, url)) {
      port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});  // polling a child process, not test timing
  }
  stop();
  throw std::runtime_error("nats-server did not start within 15 s; see " + dir_ + "/server.log");
}

void NatsServer::start() {
  if (pid_ > 0) return;
  launch(false);
}

void NatsServer::stop() {
  stop_process(pid_, std::chrono::seconds{10});
  pid_ = -1;
}

void NatsServer::kill_now() {
  kill_process(pid_);
  pid_ = -1;
}

void NatsServer::pause() {
  pause_process(pid_);
}

void NatsServer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string NatsServer::url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

NatsCluster::NatsCluster() {
  constexpr std::size_t size = 3;
  std::vector<std::uint16_t> routes;
  for (std::size_t i = 0; i < size; ++i) routes.push_back(free_port());
  for (std::size_t i = 0; i < size; ++i) {
    std::string others;
    for (std::size_t j = 0; j < size; ++j) {
      if (j != i) others += (others.empty() ? "" : ", ") + ("nats://127.0.0.1:" + std::to_string(routes[j]));
    }
    const std::string config = "server_name: n" + std::to_string(i) + "\n" +
                               "cluster {\n  name: fleetcron-test\n  listen: 127.0.0.1:" + std::to_string(routes[i]) +
                               "\n  routes: [" + others + "]\n}\n";
    nodes_.push_back(std::make_unique<NatsServer>(NatsServer::Options{.config = config}));
  }
}

std::vector<std::string> NatsCluster::urls(std::size_t first) const {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < nodes_.size(); ++k) out.push_back(nodes_[(first + k) % nodes_.size()]->url());
  return out;
}

std::string shared_nats_url() {
  if (const char* given = std::getenv("FLEETCRON_TEST_NATS_URL"); given != nullptr && *given != '\0') return given;
  static NatsServer server;
  return server.url();
}

std::string unique_bucket() {
  static std::atomic<int> counter{0};
  static const auto run = std::random_device{}();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? info->name() : "test";
  // Bucket names allow letters, digits, '-' and '_' (a parameterized
  // test's name has a '/').
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  return "T_" + name.substr(0, 40) + "_" + std::to_string(run) + "_" + std::to_string(counter++);
}

}  // namespace fleetcron::test
