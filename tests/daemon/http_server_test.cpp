// The daemon's HTTP listener, spoken to over raw sockets: its bounds on a
// request (head and time), keep-alive with pipelined requests, and which
// Host names a loopback listener serves (docs/api.md).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "daemon/http/http_server.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

HttpRoutes routes() {
  HttpRoutes r;
  r.metrics = [] { return std::string("up 1\n"); };
  r.ready = [] { return true; };
  r.page = [] { return HttpAnswer{200, "text/html", "<title>fleetcron</title>", {}}; };
  r.api = [](const HttpRequest& request) { return HttpAnswer{200, "application/json", "{\"path\":\"" + request.path + "\"}", {}}; };
  return r;
}

/// A client connection with send and receive timeouts (never a hang).
class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }
  /// Whether all of `text` was sent.
  bool send(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::send(fd_, text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  /// Everything until the server closes (or 10 s pass without a byte).
  std::string receive_all() {
    std::string out;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return out;
      out.append(buffer, static_cast<std::size_t>(n));
    }
  }
  /// Whether the server closed the connection within `limit` (a byte or
  /// an answer it sends first is read and dropped).
  bool closed_within(std::chrono::milliseconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < give_up) {
      pollfd fd{fd_, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::size_t count(const std::string& text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// A header line that never ends: before, httplib buffered it whole (a
// 256 MiB line grew the daemon by 440 MiB). Now the head is cut at 16 KiB:
// the server answers 400 and closes, and most of the line is never sent.
TEST(HttpServer, AHeaderLineWithoutEndIsCutAtTheHeadBound) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Long: "));
  const std::string chunk(64 * 1024, 'a');
  std::size_t sent = 0;
  constexpr std::size_t limit = 256 * 1024 * 1024;
  while (sent < limit && client.send(chunk)) sent += chunk.size();
  EXPECT_LT(sent, limit) << "the server read a 256 MiB header line";
  const std::string answer = client.receive_all();
  EXPECT_TRUE(answer.empty() || answer.starts_with("HTTP/1.1 400")) << answer.substr(0, 200);
}

// A head just under the bound is served (in lines under cpp-httplib's own
// 8 KiB bound on one line, which it checks once the line is read).
TEST(HttpServer, AHeadUnderTheBoundIsServed) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  const std::string padding((http_max_head_bytes - 200) / 2, 'b');
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + padding + "\r\nX-Pad-2: " +
                          padding + "\r\nConnection: close\r\n\r\n"));
  const std::string answer = client.receive_all();
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer.substr(0, 200);
  EXPECT_NE(answer.find("ok\n"), std::string::npos);
}

// A client that sends its request a byte at a time, each within the 2 s
// read timeout, held a worker thread for as long as it liked; now the
// whole request must arrive within 4 s of the server waiting for it.
TEST(HttpServer, ADrippingRequestIsClosedAtTheRequestDeadline) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  const auto started = std::chrono::steady_clock::now();
  bool closed = false;
  // One byte every 300 ms, for up to 20 s (five times the deadline).
  for (int i = 0; i < 66 && !closed; ++i) {
    if (!client.send(i == 0 ? "G" : "X")) break;
    closed = client.closed_within(300ms);
  }
  closed = closed || client.closed_within(1s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(closed) << "the dripping client still held its connection after 20 s";
  EXPECT_GE(took, http_request_read_limit - 500ms);
}

// Keep-alive: two requests sent together are both answered, in order, on
// the one connection (the second waits in the stream's buffer).
TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("GET /api/v1/one HTTP/1.1\r\nHost: localhost\r\n\r\n"
                          "GET /api/v1/two HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  const std::string answer = client.receive_all();
  EXPECT_EQ(count(answer, "HTTP/1.1 200"), 2u) << answer;
  const auto one = answer.find("/api/v1/one");
  const auto two = answer.find("/api/v1/two");
  ASSERT_NE(one, std::string::npos) << answer;
  ASSERT_NE(two, std::string::npos) << answer;
  EXPECT_LT(one, two);
}

// A body over its bound is refused (the handler never sees a part of it),
// the connection closed once the client has the answer.
TEST(HttpServer, ABodyOverItsBoundIsRefused) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  const std::string body(http_max_request_bytes + 1, 'c');
  client.send("POST /api/v1/x HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  const std::string answer = client.receive_all();
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 413")) << answer.substr(0, 200);
}

std::string status_for_host(int port, const std::string& host) {
  Client client(port);
  if (!client.connected()) return "no connection";
  client.send("GET /api/v1/fleet HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
  return client.receive_all().substr(0, 12);
}

// DNS rebinding: a loopback listener serves loopback names exactly.
TEST(HttpServer, ALoopbackListenerServesLoopbackNamesExactly) {
  HttpServer server("127.0.0.1:0", routes());
  const int port = server.port();
  for (const char* host : {"localhost", "LocalHost:80", "127.0.0.1:9464", "127.0.0.2", "[::1]:9464"}) {
    EXPECT_EQ(status_for_host(port, host), "HTTP/1.1 200") << host;
  }
  for (const char* host : {"127.0.0.1.evil.example", "127.0.0.1.evil.example:9464", "evil.example", "127.1",
                           "localhost.evil.example", "128.0.0.1"}) {
    EXPECT_EQ(status_for_host(port, host), "HTTP/1.1 403") << host;
  }
}

// A header line over cpp-httplib's 8 KiB is a 400, and the connection is
// closed at once: the rest of that head is not read as another request.
TEST(HttpServer, AHeadRefusedPartWayEndsTheConnection) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Long: " + std::string(10'000, 'd') +
                          "\r\nX-Next: 1\r\n\r\n"));
  const std::string answer = client.receive_all();
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 400")) << answer.substr(0, 200);
  EXPECT_EQ(count(answer, "HTTP/1.1"), 1u) << answer;
}

// Every answer forbids framing by another site.
TEST(HttpServer, AnswersMayNotBeFramed) {
  HttpServer server("127.0.0.1:0", routes());
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  client.send("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  const std::string answer = client.receive_all();
  EXPECT_NE(answer.find("Content-Security-Policy: frame-ancestors 'none'"), std::string::npos) << answer;
  EXPECT_NE(answer.find("X-Frame-Options: DENY"), std::string::npos) << answer;
}

}  // namespace
}  // namespace fleetcron::daemon
