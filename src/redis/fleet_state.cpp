#include "fleetcron/redis/fleet_state.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <stdexcept>

#include "redis/commands.h"
#include "redis/scripts.h"

namespace fleetcron::redis {

namespace {

const Script& advance_script() {
  static const Script script(detail::advance_cursor_script);
  return script;
}

const Script& catch_up_script() {
  static const Script script(detail::catch_up_script);
  return script;
}

std::int64_t micros_of(Instant at) {
  return std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch()).count();
}

std::string keep_ms(std::chrono::nanoseconds keep_for) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(keep_for).count());
}

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc{} && end == text.data() + text.size();
}

// "<instant µs> <digest> <version>"; nullopt if it is not that.
std::optional<JobCursor> parse_cursor(std::string_view value) {
  const auto first = value.find(' ');
  const auto second = first == std::string_view::npos ? first : value.find(' ', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  std::int64_t micros = 0;
  JobCursor cursor;
  if (!parse_number(value.substr(0, first), micros) ||
      !parse_number(value.substr(first + 1, second - first - 1), cursor.schedule_digest) ||
      !parse_number(value.substr(second + 1), cursor.version)) {
    return std::nullopt;
  }
  cursor.instant = Instant{std::chrono::microseconds{micros}};
  return cursor;
}

}  // namespace

class FLEETCRON_LOCAL FleetState::Impl {
 public:
  Impl(std::shared_ptr<Client> client, FleetStateOptions options)
      : client_(std::move(client)), options_(std::move(options)), version_key_(options_.fleet_prefix + "version") {}

  std::string cursor_key(std::string_view job_key) const {
    return fmt::format("{}cursor:{{{}}}", options_.fleet_prefix, job_key);
  }

  /// Runs `script` on the job's cursor; the reply, or an error message.
  std::pair<Reply, std::string> run(const Script& script, std::string_view job_key,
                                    std::span<const std::string> args) {
    const std::array<std::string, 2> keys{cursor_key(job_key), version_key_};
    try {
      Reply reply = client_->impl().eval(script, keys, args);
      if (reply.is_error()) return {{}, fmt::format("{}: {}", client_->describe(), reply.text)};
      return {std::move(reply), {}};
    } catch (const std::exception& e) {
      return {{}, e.what()};  // fail closed: the caller answers with an error
    }
  }

  /// The cursor in `value`, or an error naming the key.
  std::pair<std::optional<JobCursor>, std::string> decode(std::string_view job_key, std::string_view value) const {
    if (std::optional<JobCursor> cursor = parse_cursor(value)) return {cursor, {}};
    return {std::nullopt, fmt::format("{}: {} holds \"{}\", not a cursor (\"<instant µs> <digest> <version>\")",
                                      client_->describe(), cursor_key(job_key), value.substr(0, 64))};
  }

  std::shared_ptr<Client> client_;
  FleetStateOptions options_;
  std::string version_key_;
};

FleetState::FleetState(std::shared_ptr<Client> client, FleetStateOptions options) {
  if (!client) throw std::invalid_argument("redis::FleetState: client is null");
  if (options.fleet_prefix.empty()) throw std::invalid_argument("redis::FleetStateOptions.fleet_prefix: empty");
  impl_ = std::make_unique<Impl>(std::move(client), std::move(options));
}

FleetState::~FleetState() = default;

const FleetStateOptions& FleetState::options() const noexcept { return impl_->options_; }

std::string FleetState::cursor_key(std::string_view job_key) const { return impl_->cursor_key(job_key); }

CursorRead FleetState::read_cursor(std::string_view job_key) {
  check_job_key(job_key);
  Reply reply;
  try {
    reply = impl_->client_->impl().command({"GET", impl_->cursor_key(job_key)});
  } catch (const std::exception& e) {
    return {CursorRead::Status::error, std::nullopt, e.what()};
  }
  if (reply.is_nil()) return {CursorRead::Status::absent, std::nullopt, {}};
  if (reply.type != Reply::Type::string) {
    return {CursorRead::Status::error, std::nullopt,
            fmt::format("{}: GET {} answered {}", impl_->client_->describe(), impl_->cursor_key(job_key),
                        reply.is_error() ? reply.text : std::string(to_string(reply.type)))};
  }
  auto [cursor, error] = impl_->decode(job_key, reply.text);
  if (!cursor) return {CursorRead::Status::error, std::nullopt, std::move(error)};
  return {CursorRead::Status::found, cursor, {}};
}

CursorAdvance FleetState::advance_cursor(std::string_view job_key, Instant instant, std::uint64_t schedule_digest,
                                         std::chrono::nanoseconds keep_for) {
  check_cursor_arguments(job_key, keep_for);
  const std::array<std::string, 3> args{std::to_string(micros_of(instant)), std::to_string(schedule_digest),
                                        keep_ms(keep_for)};
  auto [reply, error] = impl_->run(advance_script(), job_key, args);
  if (!error.empty()) return {CursorAdvance::Status::error, std::move(error)};
  if (reply.type != Reply::Type::integer) {
    return {CursorAdvance::Status::error,
            fmt::format("{}: the cursor script answered {}", impl_->client_->describe(), to_string(reply.type))};
  }
  return {CursorAdvance::Status::advanced, {}};
}

CatchUpClaim FleetState::claim_catch_up(std::string_view job_key, const std::optional<JobCursor>& seen,
                                        Instant instant, std::uint64_t schedule_digest,
                                        std::chrono::nanoseconds keep_for) {
  check_cursor_arguments(job_key, keep_for, seen, instant);
  const std::array<std::string, 4> args{seen ? std::to_string(seen->version) : std::string(),
                                        std::to_string(micros_of(instant)), std::to_string(schedule_digest),
                                        keep_ms(keep_for)};
  auto [reply, error] = impl_->run(catch_up_script(), job_key, args);
  if (!error.empty()) return {CatchUpClaim::Status::error, std::nullopt, std::move(error)};
  if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::integer || reply.elements[1].type != Reply::Type::string) {
    return {CatchUpClaim::Status::error, std::nullopt,
            fmt::format("{}: the catch-up script answered {}", impl_->client_->describe(), to_string(reply.type))};
  }
  const bool won = reply.elements[0].integer == 1;
  if (!won && reply.elements[1].text.empty()) return {CatchUpClaim::Status::superseded, std::nullopt, {}};
  auto [cursor, decode_error] = impl_->decode(job_key, reply.elements[1].text);
  if (!cursor) return {CatchUpClaim::Status::error, std::nullopt, std::move(decode_error)};
  return {won ? CatchUpClaim::Status::claimed : CatchUpClaim::Status::superseded, cursor, {}};
}

}  // namespace fleetcron::redis
