// /metrics, /healthz and /readyz over HTTP (cpp-httplib, in its own
// translation unit: its header is heavy).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace fleetcron::daemon {

class MetricsServer {
 public:
  /// Binds `address` ("host:port"; port 0 picks a free one); throws
  /// std::runtime_error naming the address if it cannot.
  MetricsServer(const std::string& address, std::function<std::string()> metrics, std::function<bool()> ready);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace fleetcron::daemon
