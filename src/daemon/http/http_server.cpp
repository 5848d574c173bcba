#include "daemon/http/http_server.h"
#include "daemon/observe/json_output.h"

#include "daemon/http/http_client.h"
#include "daemon/config/settings.h"

#include <fmt/format.h>
#include <httplib.h>  // with CPPHTTPLIB_OPENSSL_SUPPORT (its pkg-config flags): https:// webhooks

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
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

using Steady = std::chrono::steady_clock;

/// A connection's socket as httplib reads requests from it, within bounds
/// httplib 0.11 does not keep by itself: it reads a header line whole
/// before it checks the line's length, so a client that never sends a
/// newline grew the daemon without end. Here a request's head (request
/// line and headers, up to the blank line) may be at most
/// http_max_head_bytes, and the whole request must be read within
/// http_request_read_limit: past either, reads fail and httplib answers
/// 400 and closes. Reads go through a small buffer (httplib reads header
/// lines a byte at a time), which keeps a pipelined next request.
class BoundedStream final : public httplib::Stream {
 public:
  BoundedStream(int socket, std::chrono::milliseconds io_timeout) : socket_(socket), io_timeout_(io_timeout) {}

  /// A new request starts: its head is counted and timed from here.
  void start_request() {
    deadline_ = Steady::now() + http_request_read_limit;
    head_bytes_ = 0;
    in_head_ = true;
    tail_ = 0;
  }
  [[nodiscard]] bool buffered() const { return begin_ < end_; }
  /// Whether the request's head was read to its blank line (not so after
  /// a head over its bound, or one httplib refused part way: what follows
  /// is not a request, and the connection is closed).
  [[nodiscard]] bool head_complete() const { return !in_head_; }

  bool is_readable() const override { return buffered() || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (Steady::now() >= deadline_) return -1;
    if (!buffered()) {
      if (!wait(POLLIN)) return -1;
      ssize_t n = 0;
      do {
        n = ::recv(socket_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    std::size_t take = std::min(size, end_ - begin_);
    if (in_head_) take = head_part(take);
    if (take == 0) return -1;  // the head is over its bound
    std::memcpy(ptr, buffer_.data() + begin_, take);
    begin_ += take;
    return static_cast<ssize_t>(take);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (!wait(POLLOUT)) return -1;
    ssize_t n = 0;
    do {
      n = ::send(socket_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { name_of(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { name_of(::getsockname, ip, port); }
  socket_t socket() const override { return socket_; }

 private:
  /// How many of the next `take` buffered bytes the head may still have;
  /// counts them, and notes the blank line that ends the head.
  std::size_t head_part(std::size_t take) {
    std::size_t i = 0;
    for (; i < take && in_head_; ++i) {
      if (head_bytes_ == http_max_head_bytes) return i;
      ++head_bytes_;
      tail_ = (tail_ << 8) | static_cast<unsigned char>(buffer_[begin_ + i]);
      if ((tail_ & 0xffffffffU) == 0x0d0a0d0aU || (tail_ & 0xffffU) == 0x0a0aU) in_head_ = false;
    }
    return i;
  }

  /// Waits for `events` within the I/O timeout; a read, also within the
  /// request's deadline (the answer is written within the I/O timeout).
  bool wait(short events) const {
    Steady::duration left = io_timeout_;
    if (events == POLLIN) left = std::min(left, deadline_ - Steady::now());
    if (left <= Steady::duration::zero()) return false;
    pollfd fd{socket_, events, 0};
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    int ready = 0;
    do {
      ready = ::poll(&fd, 1, static_cast<int>(ms));
    } while (ready < 0 && errno == EINTR);
    return ready > 0 && (fd.revents & (events | POLLHUP | POLLERR)) != 0;
  }

  template <class Name>
  void name_of(Name name, std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    ip.clear();
    port = 0;
    if (name(socket_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
      ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
      port = ntohs(v4.sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
      ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
      port = ntohs(v6.sin6_port);
    }
    ip = text;
  }

  int socket_;
  std::chrono::milliseconds io_timeout_;
  Steady::time_point deadline_ = Steady::time_point::max();
  std::size_t head_bytes_ = 0;
  bool in_head_ = true;
  std::uint32_t tail_ = 0;  // the head's last four bytes
  std::array<char, 4096> buffer_{};
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

/// httplib's server with its connections read through a BoundedStream
/// (the keep-alive loop is this one's: httplib's own is not in its API).
class BoundedServer final : public httplib::Server {
 private:
  bool process_and_close_socket(socket_t socket) override {
    BoundedStream stream(socket, http_io_timeout);
    bool ok = true;
    for (std::size_t left = http_max_requests_per_connection; left > 0 && ok; --left) {
      if (!stream.buffered() && !idle_until_readable(socket)) break;
      stream.start_request();
      bool closed = false;
      ok = process_request(stream, left == 1 || !is_running(), closed, nullptr) && !closed && stream.head_complete();
    }
    linger_and_close(socket);
    return ok;
  }

  /// Closes after the client has had the answer: a socket closed with
  /// unread bytes (a refused body, the rest of a head over its bound)
  /// resets the connection, and the client may lose the answer with it.
  /// So the write side is shut first and what comes in is read and
  /// dropped, bounded: at most 64 KiB, for at most 500 ms.
  static void linger_and_close(socket_t socket) {
    ::shutdown(socket, SHUT_WR);
    const auto give_up = Steady::now() + std::chrono::milliseconds{500};
    std::array<char, 4096> scratch{};
    for (std::size_t drained = 0; drained < 64 * 1024;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(give_up - Steady::now()).count();
      pollfd fd{socket, POLLIN, 0};
      if (left <= 0 || ::poll(&fd, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = ::recv(socket, scratch.data(), scratch.size(), 0);
      if (n <= 0) break;
      drained += static_cast<std::size_t>(n);
    }
    ::close(socket);
  }

  /// Waits up to the keep-alive timeout for the next request, looking
  /// every 100 ms whether the server stops.
  bool idle_until_readable(socket_t socket) const {
    const auto give_up = Steady::now() + http_idle_timeout;
    while (is_running() && Steady::now() < give_up) {
      pollfd fd{socket, POLLIN, 0};
      const int ready = ::poll(&fd, 1, 100);
      if (ready > 0) return true;
      if (ready < 0 && errno != EINTR) return false;
    }
    return false;
  }
};

/// localhost, an IPv4 literal in 127.0.0.0/8, or ::1: exactly these
/// (127.0.0.1.evil.example is another name, which DNS may point here).
bool is_loopback_name(std::string_view host) {
  if (host.size() == 9 && std::equal(host.begin(), host.end(), "localhost", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      })) {
    return true;
  }
  if (host == "::1" || host == "[::1]") return true;
  in_addr address{};
  const std::string text(host);
  return inet_pton(AF_INET, text.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
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
  // Neither the page nor an API answer is framed by another site
  // (clickjacking the page's buttons), nor read as another type.
  response.set_header("Content-Security-Policy", "frame-ancestors 'none'");
  response.set_header("X-Frame-Options", "DENY");
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_content(from.body, from.content_type.c_str());
}

}  // namespace

struct HttpServer::Impl {
  BoundedServer server;
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
                      error_document(fmt::format("Host {} is not served here: this listener is on loopback and answers "
                                                 "localhost, 127.0.0.0/8 and [::1] only (bind another address to serve "
                                                 "other names)",
                                                 header.size() <= 100 ? header : "(this one)")) +
                          "\n",
                      {}};
  }

  /// The routes: metrics, health, the page, the API.
  void add_routes() {
    const HttpRoutes& r = routes;
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
      server.Get("/", [&r, impl = this](const httplib::Request& request, httplib::Response& response) {
        answer(impl->refuse_host(request).value_or(r.page()), response);
      });
    }
    if (r.api) add_api_routes();
    server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
      response.status = 500;
      response.set_content(error_document("internal error") + "\n", "application/json");
    });
  }

  /// The API's routes: /api/..., a body read for the methods that carry one.
  void add_api_routes() {
    const HttpRoutes& r = routes;
    const Impl* impl = this;
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
        const bool read = content([&](const char* data, std::size_t length) {
          converted.body.append(data, length);
          return converted.body.size() <= http_max_request_bytes;
        });
        if (!read) {
          // Not a part of it to act on: refused, and the connection closed.
          response.set_header("Connection", "close");
          return answer(HttpAnswer{413, "application/json",
                                   error_document(fmt::format("the request body is over {} bytes, or was not read whole",
                                                              http_max_request_bytes)) +
                                       "\n",
                                   {}},
                        response);
        }
      }
      answer(r.api(converted), response);
    };
    server.Get(R"(/api/.*)", api);
    server.Post(R"(/api/.*)", api_with_body);
    server.Put(R"(/api/.*)", api_with_body);
    server.Delete(R"(/api/.*)", api);
    server.Patch(R"(/api/.*)", api_with_body);
  }
};

HttpServer::HttpServer(const std::string& address, HttpRoutes routes) : impl_(std::make_unique<Impl>()) {
  const ListenAddress listen = parse_listen_address(address);
  impl_->routes = std::move(routes);
  impl_->loopback = is_loopback_name(listen.host);
  auto& server = impl_->server;
  server.set_tcp_nodelay(true);  // otherwise keep-alive scrapes crawl (Nagle + delayed ACK)
  server.new_task_queue = [] { return new BoundedPool(http_threads, http_max_waiting_connections); };
  // Reads, writes and keep-alive: BoundedServer's own bounds.
  server.set_payload_max_length(http_max_request_bytes);
  impl_->add_routes();
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
