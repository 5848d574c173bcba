#include "redis/connection.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace fleetcron::redis::detail {

namespace {

timeval to_timeval(std::chrono::milliseconds duration) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(duration.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((duration.count() % 1000) * 1000);
  return tv;
}

struct FreeReply {
  void operator()(void* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<void, FreeReply>;

// hiredis reports a read timeout as an I/O error with EAGAIN's text.
bool is_timeout(const redisContext& context) {
  if (context.err != REDIS_ERR_IO) return false;
  return std::strcmp(context.errstr, std::strerror(EAGAIN)) == 0 ||
         std::strcmp(context.errstr, std::strerror(EWOULDBLOCK)) == 0 ||
         std::strcmp(context.errstr, std::strerror(ETIMEDOUT)) == 0 ||
         std::strstr(context.errstr, "timed out") != nullptr;
}

// hiredis 0.14 writes with write(2): a write to a connection the server
// closed raises SIGPIPE, which kills the process by default. This blocks
// SIGPIPE on the calling thread while hiredis does I/O and discards one
// raised meanwhile (the write itself then fails with EPIPE).
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeBlock() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

/// `text` with every occurrence of `secret` replaced by "***".
std::string scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) text.replace(at, secret.size(), "***");
  return text;
}

}  // namespace

Reply decode(const redisReply& reply) {
  Reply out;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      out.integer = reply.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      out.elements.reserve(reply.elements);
      for (std::size_t i = 0; i < reply.elements; ++i) out.elements.push_back(decode(*reply.element[i]));
      break;
    case REDIS_REPLY_NIL:
    default:
      out.type = Reply::Type::nil;
      break;
  }
  return out;
}

void Connection::Free::operator()(redisContext* context) const noexcept { redisFree(context); }

Connection::Connection(const ClientOptions& options, const std::string& description) : description_(description) {
  const timeval connect_tv = to_timeval(options.connect_timeout);
  redisContext* raw = options.unix_socket.empty()
                          ? redisConnectWithTimeout(options.host.c_str(), options.port, connect_tv)
                          : redisConnectUnixWithTimeout(options.unix_socket.c_str(), connect_tv);
  if (raw == nullptr) throw ConnectError(fmt::format("{}: cannot allocate a connection", description_));
  context_.reset(raw);
  if (context_->err != 0) {
    const bool timed_out = is_timeout(*context_);
    throw ConnectError(fmt::format("{}: connect {}: {}", description_,
                                   timed_out ? "timed out" : "failed", context_->errstr));
  }
  // AUTH and SELECT are bounded by the connect timeout, then every
  // command by the command timeout.
  if (redisSetTimeout(context_.get(), connect_tv) != REDIS_OK) fail("setting the timeout");
  // TCP only: on a Unix socket hiredis fails with EOPNOTSUPP and leaves
  // the context in error, so every command on it failed.
  if (options.unix_socket.empty()) redisEnableKeepAlive(context_.get());
  if (!options.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    const Reply reply = command(auth);
    if (reply.is_error()) {
      // The server's text (e.g. "WRONGPASS invalid username-password pair")
      // never contains the password.
      throw AuthError(fmt::format("{}: AUTH{} refused: {}", description_,
                                  options.user.empty() ? "" : " as user " + options.user,
                                  scrub(reply.text, options.password)));
    }
  }
  if (options.database != 0) {
    const Reply reply = command(std::vector<std::string>{"SELECT", std::to_string(options.database)});
    if (reply.is_error()) {
      throw AuthError(fmt::format("{}: SELECT {} refused: {}", description_, options.database, reply.text));
    }
  }
  if (redisSetTimeout(context_.get(), to_timeval(options.request_timeout)) != REDIS_OK) fail("setting the timeout");
}

Connection::~Connection() = default;

void Connection::fail(const std::string& what) {
  broken_ = true;
  if (is_timeout(*context_)) {
    throw TimeoutError(fmt::format("{}: {}: no reply within the request timeout", description_, what));
  }
  throw IoError(fmt::format("{}: {}: {}", description_, what,
                            context_->errstr[0] != '\0' ? context_->errstr : "connection broken"));
}

void Connection::append(std::span<const std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) {
    fail("sending a command");
  }
}

Reply Connection::read() {
  void* raw = nullptr;
  if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) fail("reading a reply");
  ReplyPtr reply(raw);
  return decode(*static_cast<redisReply*>(raw));
}

Reply Connection::command(std::span<const std::string> args) {
  if (broken_) fail("using a broken connection");
  const SigpipeBlock no_sigpipe;
  broken_ = true;  // until the reply is read: an exception midway leaves it unusable
  append(args);
  Reply reply = read();
  broken_ = false;
  return reply;
}

std::vector<Reply> Connection::pipeline(std::span<const std::vector<std::string>> commands) {
  if (broken_) fail("using a broken connection");
  const SigpipeBlock no_sigpipe;
  broken_ = true;  // until every reply is read: unread replies must not reach the next caller
  for (const auto& command : commands) append(command);
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) replies.push_back(read());
  broken_ = false;
  return replies;
}

}  // namespace fleetcron::redis::detail
