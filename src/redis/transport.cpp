#include "redis/transport.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "fleetcron/backend_error.h"
#include "redis/tls_context.h"

namespace fleetcron::redis::detail {

namespace {

using Clock = std::chrono::steady_clock;

bool is_ip_literal(const std::string& name) {
  in6_addr scratch{};
  return inet_pton(AF_INET, name.c_str(), &scratch) == 1 || inet_pton(AF_INET6, name.c_str(), &scratch) == 1;
}

// As hiredis did: no Nagle delay, and keepalive probes after 15 s idle so
// a vanished peer is noticed on an idle pooled connection.
void tune_tcp(int fd) {
  const int on = 1, idle = 15, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

struct FreeAddresses {
  void operator()(addrinfo* list) const noexcept { freeaddrinfo(list); }
};

std::string ca_source(const ClientOptions& options) {
  if (options.tls_ca_file.empty() && options.tls_ca_dir.empty()) return "the system's default store";
  if (options.tls_ca_dir.empty()) return options.tls_ca_file;
  if (options.tls_ca_file.empty()) return options.tls_ca_dir;
  return options.tls_ca_file + " and " + options.tls_ca_dir;
}

}  // namespace

Transport::Transport(const ClientOptions& options, const TlsContext* tls, const std::string& description,
                     std::chrono::milliseconds connect_timeout)
    : description_(description) {
  const auto deadline = Clock::now() + connect_timeout;
  try {
    connect_socket(options, deadline);
    if (tls != nullptr) handshake(options, *tls, deadline);
  } catch (...) {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    throw;
  }
}

Transport::~Transport() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // no close_notify: the server needs none, and it could block
  if (fd_ >= 0) ::close(fd_);
}

void Transport::connect_socket(const ClientOptions& options, Clock::time_point deadline) {
  if (options.unix_socket.empty()) return connect_tcp(options, deadline);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (options.unix_socket.size() >= sizeof address.sun_path) {
    throw ConnectError(fmt::format("{}: connect failed: socket path longer than {} bytes", description_,
                                   sizeof address.sun_path - 1));
  }
  std::memcpy(address.sun_path, options.unix_socket.c_str(), options.unix_socket.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw ConnectError(fmt::format("{}: connect failed: socket: {}", description_, std::strerror(errno)));
  // EAGAIN on a Unix socket: the listener's backlog is full and nothing is
  // connected; try again until the deadline.
  for (;;) {
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return;  // NOLINT: sockets API
    const int error = errno;
    if (error != EAGAIN && error != EINTR) {
      throw ConnectError(fmt::format("{}: connect failed: {}", description_, std::strerror(error)));
    }
    if (Clock::now() >= deadline) throw ConnectError(fmt::format("{}: connect timed out", description_));
    ::poll(nullptr, 0, 1);  // a millisecond: the server accepts meanwhile
  }
}

void Transport::connect_tcp(const ClientOptions& options, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const std::string port = std::to_string(options.port);
  if (const int status = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &raw); status != 0) {
    throw ConnectError(fmt::format("{}: connect failed: cannot resolve {}: {}", description_, options.host,
                                   gai_strerror(status)));
  }
  const std::unique_ptr<addrinfo, FreeAddresses> addresses(raw);
  std::size_t left = 0;
  for (const addrinfo* address = raw; address != nullptr; address = address->ai_next) ++left;
  std::string errors;
  for (const addrinfo* address = raw; address != nullptr; address = address->ai_next, --left) {
    // Each address gets its share of the time left: a silently dropped
    // first one (an unrouted IPv6 address) leaves time for the next.
    const auto now = Clock::now();
    const auto until = left <= 1 || now >= deadline ? deadline : now + (deadline - now) / static_cast<long>(left);
    const std::string error = try_address(*address, until);
    if (error.empty()) {
      tune_tcp(fd_);
      return;
    }
    char name[INET6_ADDRSTRLEN] = "?";
    const void* ip = address->ai_family == AF_INET6
                         ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address->ai_addr)->sin6_addr)
                         : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address->ai_addr)->sin_addr);
    inet_ntop(address->ai_family, ip, name, sizeof name);  // NOLINT: the sockets API
    errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", name, error);
  }
  if (errors.find("timed out") != std::string::npos && errors.find(';') == std::string::npos) {
    throw ConnectError(fmt::format("{}: connect timed out", description_));
  }
  throw ConnectError(fmt::format("{}: connect failed: {}", description_, errors.empty() ? "no address" : errors));
}

std::string Transport::try_address(const addrinfo& address, Clock::time_point deadline) {
  fd_ = ::socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, address.ai_protocol);
  if (fd_ < 0) return std::strerror(errno);
  int error = ::connect(fd_, address.ai_addr, address.ai_addrlen) == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    if (!wait(POLLOUT, deadline)) {
      error = ETIMEDOUT;
    } else {
      socklen_t length = sizeof error;
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    }
  }
  if (error == 0) return {};
  ::close(fd_);
  fd_ = -1;
  return error == ETIMEDOUT ? "timed out" : std::strerror(error);
}

void Transport::handshake(const ClientOptions& options, const TlsContext& tls, Clock::time_point deadline) {
  ERR_clear_error();
  ssl_ = SSL_new(tls.get());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    throw ConnectError(fmt::format("{}: TLS setup failed: {}", description_, take_openssl_errors()));
  }
  const std::string& name = options.tls_server_name.empty() ? options.host : options.tls_server_name;
  const bool ip = is_ip_literal(name);
  // SSL_set_tlsext_host_name() is a macro with a C cast; this is what it does.
  if (!ip) SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(name.c_str()));
  if (options.tls_verify) {
    SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const bool named = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str()) == 1
                          : SSL_set1_host(ssl_, name.c_str()) == 1;
    if (!named) throw ConfigError(fmt::format("{}: TLS: cannot verify against the name {}", description_, name));
  }
  for (;;) {
    const int result = SSL_connect(ssl_);
    if (result == 1) return;
    const int saved_errno = errno;
    const int error = SSL_get_error(ssl_, result);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (!wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        throw ConnectError(fmt::format("{}: TLS handshake timed out", description_));
      }
      continue;
    }
    const long verified = SSL_get_verify_result(ssl_);  // also set without verification: ignored then
    if (options.tls_verify && verified != X509_V_OK) {
      throw ConfigError(fmt::format("{}: TLS: the server's certificate is refused: {} (expected name {}, CAs from {})",
                                     description_, X509_verify_cert_error_string(verified), name,
                                     ca_source(options)));
    }
    std::string reason = take_openssl_errors();
    if (reason.empty()) reason = error == SSL_ERROR_SYSCALL && saved_errno != 0 ? std::strerror(saved_errno) : "connection closed";
    throw ConnectError(fmt::format("{}: TLS handshake failed: {}", description_, reason));
  }
}

bool Transport::wait(short events, Clock::time_point deadline) const {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd entry{fd_, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 3'600'000)));
    if (ready > 0) return true;  // readable, writable, or an error the next call reports
    if (ready < 0 && errno != EINTR) return false;  // poll itself failed (ENOMEM): give up as on a timeout
  }
}

void Transport::fail_io(std::string_view what, int error) const {
  throw IoError(fmt::format("{}: {}: {}", description_, what, error == 0 ? "server closed the connection"
                                                                         : std::strerror(error)));
}

void Transport::fail_timeout(std::string_view what) const {
  throw TimeoutError(fmt::format("{}: {}: no reply within the request timeout", description_, what));
}

void Transport::await_tls(int result, Clock::time_point deadline, std::string_view what) {
  const int saved_errno = errno;
  const int error = SSL_get_error(ssl_, result);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    if (!wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) fail_timeout(what);
    return;
  }
  if (error == SSL_ERROR_ZERO_RETURN) fail_io(what, 0);
  const std::string reason = take_openssl_errors();
  if (error == SSL_ERROR_SYSCALL || reason.empty()) fail_io(what, saved_errno);
  throw IoError(fmt::format("{}: {}: TLS: {}", description_, what, reason));
}

void Transport::write(std::string_view data, std::string_view what) {
  while (!data.empty()) {
    const auto deadline = Clock::now() + io_timeout_;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int written = SSL_write(ssl_, data.data(), static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30)));
      if (written > 0) {
        data.remove_prefix(static_cast<std::size_t>(written));
      } else {
        await_tls(written, deadline, what);
      }
      continue;
    }
    const ssize_t written = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (written >= 0) {
      data.remove_prefix(static_cast<std::size_t>(written));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLOUT, deadline)) fail_timeout(what);
    } else if (errno != EINTR) {
      fail_io(what, errno);
    }
  }
}

std::size_t Transport::read(char* buffer, std::size_t capacity, std::string_view what) {
  for (;;) {
    const auto deadline = Clock::now() + io_timeout_;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int got = SSL_read(ssl_, buffer, static_cast<int>(std::min<std::size_t>(capacity, 1 << 30)));
      if (got > 0) return static_cast<std::size_t>(got);
      await_tls(got, deadline, what);
      continue;
    }
    const ssize_t got = ::recv(fd_, buffer, capacity, 0);
    if (got > 0) return static_cast<std::size_t>(got);
    if (got == 0) fail_io(what, 0);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLIN, deadline)) fail_timeout(what);
    } else if (errno != EINTR) {
      fail_io(what, errno);
    }
  }
}

}  // namespace fleetcron::redis::detail
