#include "daemon/http_server.h"

#include "daemon/http_client.h"
#include "daemon/settings.h"

#include <fmt/format.h>
#include <httplib.h>  // with CPPHTTPLIB_OPENSSL_SUPPORT (its pkg-config flags): https:// webhooks

#include <cerrno>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fleetcron::daemon {

namespace {

/// httplib's ThreadPool queues without bound; this one runs a connection
/// on the listener's own thread when the queue is full, which stops the
/// accepting until it ends: backpressure instead of unbounded memory.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(std::size_t threads, std::size_t max_waiting) : max_waiting_(max_waiting) {
    for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~BoundedPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard guard(mutex_);
      if (waiting_.size() < max_waiting_) {
        waiting_.push_back(std::move(fn));
        cv_.notify_one();
        return;
      }
    }
    fn();
  }
  void shutdown() override {
    {
      std::lock_guard guard(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
  }

 private:
  void work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
        if (waiting_.empty()) return;  // stopping, and nothing left
        fn = std::move(waiting_.front());
        waiting_.pop_front();
      }
      fn();
    }
  }
  std::size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> waiting_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

bool is_loopback_name(std::string_view host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
}

/// The host part of a Host header ("name:port", "[v6]:port", "name").
std::string_view host_of(std::string_view header) {
  if (header.starts_with('[')) return header.substr(0, header.find(']') + 1);
  return header.substr(0, header.find(':'));
}

HttpRequest to_request(const httplib::Request& request) {
  HttpRequest out;
  out.method = request.method;
  out.path = request.path;
  for (const auto& [name, value] : request.params) out.query.emplace(name, value);
  out.authorization = request.get_header_value("Authorization");
  out.body = request.body;
  return out;
}

void answer(const HttpAnswer& from, httplib::Response& response) {
  response.status = from.status;
  if (!from.www_authenticate.empty()) response.set_header("WWW-Authenticate", from.www_authenticate);
  response.set_header("Cache-Control", "no-store");
  response.set_content(from.body, from.content_type.c_str());
}

}  // namespace

struct HttpServer::Impl {
  httplib::Server server;
  HttpRoutes routes;
  bool loopback = false;  // bound to a loopback address: the page and the API answer loopback names only
  /// DNS rebinding: a page elsewhere that makes its name resolve to
  /// 127.0.0.1 would read a loopback API from the user's browser, under its
  /// own name. nullopt: the Host is fine.
  [[nodiscard]] std::optional<HttpAnswer> refuse_host(const httplib::Request& request) const {
    if (!loopback) return std::nullopt;
    const std::string header = request.get_header_value("Host");
    if (header.empty() || is_loopback_name(host_of(header))) return std::nullopt;
    return HttpAnswer{403, "application/json",
                      fmt::format("{{\"error\":\"Host {} is not served here: this listener is on loopback and answers "
                                  "localhost, 127.0.0.0/8 and [::1] only (bind another address to serve other names)\"}}\n",
                                  header.size() <= 100 && header.find_first_of("\"\\") == std::string::npos ? header : "(this one)"),
                      {}};
  }
};

HttpServer::HttpServer(const std::string& address, HttpRoutes routes) : impl_(std::make_unique<Impl>()) {
  const ListenAddress listen = parse_listen_address(address);
  impl_->routes = std::move(routes);
  impl_->loopback = is_loopback_name(listen.host);
  auto& server = impl_->server;
  const HttpRoutes& r = impl_->routes;
  server.set_tcp_nodelay(true);  // otherwise keep-alive scrapes crawl (Nagle + delayed ACK)
  server.new_task_queue = [] { return new BoundedPool(http_threads, http_max_waiting_connections); };
  server.set_read_timeout(std::chrono::seconds{2});
  server.set_write_timeout(std::chrono::seconds{2});
  server.set_keep_alive_timeout(2);
  server.set_keep_alive_max_count(100);
  server.set_payload_max_length(http_max_request_bytes);
  server.Get("/metrics", [&r](const httplib::Request&, httplib::Response& response) {
    response.set_content(r.metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [&r](const httplib::Request&, httplib::Response& response) {
    const bool is_ready = r.ready();
    response.status = is_ready ? 200 : 503;
    response.set_content(is_ready ? "ready\n" : "not ready\n", "text/plain");
  });
  if (r.page) {
    server.Get("/", [&r, impl = impl_.get()](const httplib::Request& request, httplib::Response& response) {
      answer(impl->refuse_host(request).value_or(r.page()), response);
    });
  }
  if (r.api) {
    const Impl* impl = impl_.get();
    const auto api = [&r, impl](const httplib::Request& request, httplib::Response& response) {
      if (auto refused = impl->refuse_host(request)) return answer(*refused, response);
      answer(r.api(to_request(request)), response);
    };
    // httplib answers 400 to a POST without Content-Length (curl -X POST
    // sends none) unless the handler reads the body itself: these read it
    // when there is one, within the request limit, and ignore its absence.
    const auto api_with_body = [&r, impl](const httplib::Request& request, httplib::Response& response,
                                          const httplib::ContentReader& content) {
      if (auto refused = impl->refuse_host(request)) return answer(*refused, response);
      HttpRequest converted = to_request(request);
      if (request.has_header("Content-Length") || request.has_header("Transfer-Encoding")) {
        content([&](const char* data, std::size_t length) {
          converted.body.append(data, length);
          return converted.body.size() <= http_max_request_bytes;
        });
      }
      answer(r.api(converted), response);
    };
    server.Get(R"(/api/.*)", api);
    server.Post(R"(/api/.*)", api_with_body);
    server.Put(R"(/api/.*)", api_with_body);
    server.Delete(R"(/api/.*)", api);
    server.Patch(R"(/api/.*)", api_with_body);
  }
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
    response.status = 500;
    response.set_content("{\"error\":\"internal error\"}", "application/json");
  });
  errno = 0;
  port_ = listen.port == 0 ? server.bind_to_any_port(listen.host)
                           : (server.bind_to_port(listen.host, listen.port) ? listen.port : -1);
  if (port_ <= 0) {
    // httplib reports only failure; the socket call that failed left errno.
    const int error = errno;
    throw std::runtime_error(fmt::format("--http {}: cannot listen there{}", address,
                                         error == 0 ? "" : fmt::format(" ({})", std::strerror(error))));
  }
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  // httplib 0.11's stop() does nothing before the listen loop runs: wait
  // for it, so the destructor can always stop and join (bounded).
  for (int i = 0; i < 500 && !impl_->server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds{2});
}

HttpServer::~HttpServer() {
  impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}

HttpPostResult http_post(const std::string& url, std::string_view body, std::string_view content_type,
                         std::chrono::milliseconds timeout) {
  HttpPostResult result;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    result.error = "not a URL";
    return result;
  }
  const auto path_start = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  try {
    httplib::Client client(origin);
    if (!client.is_valid()) {
      result.error = "cannot make a client for " + origin;
      return result;
    }
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    client.set_follow_location(false);
    if (url.starts_with("https://")) {
      client.enable_server_certificate_verification(true);
      client.set_ca_cert_path("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs");
    }
    const auto answer = client.Post(path, body.data(), body.size(), std::string(content_type));
    if (!answer) {
      result.error = httplib::to_string(answer.error());
      return result;
    }
    result.status = answer->status;
    result.delivered = answer->status >= 200 && answer->status < 300;
    if (!result.delivered) result.error = fmt::format("HTTP {}", answer->status);
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  return result;
}

}  // namespace fleetcron::daemon
