#include "daemon/metrics_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace fleetcron::daemon {

struct MetricsServer::Impl {
  httplib::Server server;
};

MetricsServer::MetricsServer(const std::string& address, std::function<std::string()> metrics,
                             std::function<bool()> ready)
    : impl_(std::make_unique<Impl>()) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error(fmt::format("--metrics {}: expected host:port", address));
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("--metrics {}: the port is not a number", address));
  }
  if (port < 0 || port > 65535) throw std::runtime_error(fmt::format("--metrics {}: port out of range", address));
  auto& server = impl_->server;
  server.set_tcp_nodelay(true);  // otherwise keep-alive scrapes crawl (Nagle + delayed ACK)
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [ready](const httplib::Request&, httplib::Response& response) {
    const bool is_ready = ready();
    response.status = is_ready ? 200 : 503;
    response.set_content(is_ready ? "ready\n" : "not ready\n", "text/plain");
  });
  if (port == 0) {
    port_ = server.bind_to_any_port(host);
  } else {
    port_ = server.bind_to_port(host, port) ? port : -1;
  }
  if (port_ <= 0) throw std::runtime_error(fmt::format("--metrics {}: cannot listen there", address));
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  // httplib 0.11's stop() does nothing before the listen loop runs: wait
  // for it, so the destructor can always stop and join (bounded).
  for (int i = 0; i < 500 && !impl_->server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds{2});
}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fleetcron::daemon
