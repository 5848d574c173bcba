#include "daemon/metrics_server.h"

#include "daemon/settings.h"

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
  const ListenAddress listen = parse_listen_address(address);
  const std::string& host = listen.host;
  int port = listen.port;
  auto& server = impl_->server;
  server.set_tcp_nodelay(true);  // otherwise keep-alive scrapes crawl (Nagle + delayed ACK)
  // Slow or idle clients cannot hold the listener: bounded reads, writes
  // and keep-alive, and threads enough for a scraper, probes and a human.
  server.new_task_queue = [] { return new httplib::ThreadPool(8); };
  server.set_read_timeout(std::chrono::seconds{2});
  server.set_write_timeout(std::chrono::seconds{2});
  server.set_keep_alive_timeout(2);
  server.set_payload_max_length(64 * 1024);
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
