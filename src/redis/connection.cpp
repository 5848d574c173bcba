#include "redis/connection.h"

#include "redis/tls_context.h"
#include "redis/transport.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

namespace fleetcron::redis::detail {

namespace {

struct FreeReply {
  void operator()(void* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<void, FreeReply>;

// OpenSSL writes with write(2): a write to a connection the server closed
// raises SIGPIPE, which kills the process by default. This blocks
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

void Connection::FreeReader::operator()(redisReader* reader) const noexcept { redisReaderFree(reader); }

Connection::Connection(const ClientOptions& options, const TlsContext* tls, const std::string& description)
    : description_(description), reader_(redisReaderCreate()) {
  if (!reader_) throw ConnectError(fmt::format("{}: cannot allocate a reply reader", description_));
  const SigpipeBlock no_sigpipe;  // a TLS handshake writes with write(2)
  transport_ = std::make_unique<Transport>(options, tls, description_, options.connect_timeout);
  // AUTH and SELECT are bounded by the connect timeout, then every wait of
  // a command by the request timeout.
  transport_->set_io_timeout(options.connect_timeout);
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
  transport_->set_io_timeout(options.request_timeout);
}

Connection::~Connection() = default;

void Connection::append(std::span<const std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(), lengths.data());
  if (length < 0 || formatted == nullptr) throw IoError(fmt::format("{}: cannot format a command", description_));
  outgoing_.append(formatted, static_cast<std::size_t>(length));
  redisFreeCommand(formatted);
}

void Connection::flush() {
  const std::string pending = std::move(outgoing_);
  outgoing_.clear();
  transport_->write(pending, "sending a command");
}

Reply Connection::read() {
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      throw IoError(fmt::format("{}: reading a reply: protocol error: {}", description_, reader_->errstr));
    }
    if (raw != nullptr) {
      const ReplyPtr reply(raw);
      return decode(*static_cast<redisReply*>(raw));
    }
    char buffer[16 * 1024];
    const std::size_t got = transport_->read(buffer, sizeof buffer, "reading a reply");
    if (redisReaderFeed(reader_.get(), buffer, got) != REDIS_OK) {
      throw IoError(fmt::format("{}: reading a reply: {}", description_, reader_->errstr));
    }
  }
}

Reply Connection::command(std::span<const std::string> args) {
  if (broken_) throw IoError(fmt::format("{}: using a broken connection", description_));
  const SigpipeBlock no_sigpipe;
  broken_ = true;  // until the reply is read: an exception midway leaves it unusable
  append(args);
  flush();
  Reply reply = read();
  broken_ = false;
  return reply;
}

std::vector<Reply> Connection::pipeline(std::span<const std::vector<std::string>> commands) {
  if (broken_) throw IoError(fmt::format("{}: using a broken connection", description_));
  const SigpipeBlock no_sigpipe;
  broken_ = true;  // until every reply is read: unread replies must not reach the next caller
  for (const auto& command : commands) append(command);
  flush();
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) replies.push_back(read());
  broken_ = false;
  return replies;
}

}  // namespace fleetcron::redis::detail
