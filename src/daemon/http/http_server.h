// The daemon's one HTTP listener (--http, alias --metrics): /metrics,
// /healthz and /readyz, the JSON API under /api/v1/ and the status page at
// / (cpp-httplib, in its own translation unit: its header is heavy). The
// routes' logic lives elsewhere (api_service.h, status_page.h) and sees
// only HttpRequest and HttpAnswer.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace fleetcron::daemon {

struct HttpRequest {
  std::string method;  // GET, POST, …
  std::string path;    // decoded
  std::map<std::string, std::string> query;
  std::string authorization;  // the Authorization header
  std::string body;
};

struct HttpAnswer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string www_authenticate;  // set for a 401
};

struct HttpRoutes {
  std::function<std::string()> metrics;
  std::function<bool()> ready;
  std::function<HttpAnswer(const HttpRequest&)> api;  // /api/…, every method
  std::function<HttpAnswer()> page;                   // GET /
};

/// Bounds: a request's line and headers of at most 16 KiB, its body of at
/// most 16 KiB, counted as they are read (nothing more is buffered), and
/// the whole request read within 4 s of its first byte; 8 worker threads
/// and 64 connections waiting for one (beyond that the listener serves the
/// next connection itself, so it accepts no more until one ends), reads and
/// writes of at most 2 s each, idle keep-alive connections closed after 2 s
/// and after 100 requests.
inline constexpr std::size_t http_max_request_bytes = 16 * 1024;
inline constexpr std::size_t http_max_head_bytes = 16 * 1024;
inline constexpr std::chrono::seconds http_request_read_limit{4};
inline constexpr std::chrono::milliseconds http_io_timeout{2000};    // each read or write
inline constexpr std::chrono::milliseconds http_idle_timeout{2000};  // keep-alive
inline constexpr std::size_t http_max_requests_per_connection = 100;
inline constexpr std::size_t http_threads = 8;
inline constexpr std::size_t http_max_waiting_connections = 64;

class HttpServer {
 public:
  /// Binds `address` ("host:port"; a bare port binds loopback; port 0
  /// picks a free one); throws std::runtime_error naming the option and
  /// the address if it cannot.
  HttpServer(const std::string& address, HttpRoutes routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace fleetcron::daemon
