#include "fleetcron/redis/elector.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "fleetcron/backend/lease_elector.h"
#include "redis/commands.h"
#include "redis/replies.h"
#include "redis/scripts.h"

namespace fleetcron::redis {

namespace {

const Script& campaign_script() {
  static const Script script(detail::campaign_script);
  return script;
}

const Script& resign_script() {
  static const Script script(detail::resign_script);
  return script;
}

std::string trim(std::string_view text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && space(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

// The lease on Redis: the campaign and resign scripts.
class FLEETCRON_LOCAL RedisLease final : public LeaseStore {
 public:
  RedisLease(std::shared_ptr<Client> client, const ElectorOptions& options)
      : client_(std::move(client)),
        leader_key_(options.leader_key),
        term_key_(options.term_key),
        ttl_ms_(std::to_string(std::chrono::ceil<std::chrono::milliseconds>(options.lease.lease_ttl).count())) {}

  LeaseAnswer campaign(std::string_view identity, std::chrono::nanoseconds, std::uint64_t known_term,
                       bool fresh_term) override {
    try {
      const std::array<std::string, 2> keys{leader_key_, term_key_};
      const std::array<std::string, 4> args{std::string(identity), ttl_ms_, std::to_string(known_term),
                                            fresh_term ? "1" : "0"};
      const Reply reply = client_->impl().eval(campaign_script(), keys, args);
      const detail::CampaignReply answer =
          reply.is_error() ? detail::CampaignReply{reply.text, false, 0} : detail::parse_campaign_reply(reply);
      if (!answer.error.empty()) return {false, 0, fmt::format("{}: {}", client_->describe(), answer.error)};
      return {answer.leader, answer.term, {}};
    } catch (const std::exception& e) {
      return {false, 0, e.what()};
    }
  }

  std::string release(std::string_view identity) override {
    try {
      const std::array<std::string, 1> keys{leader_key_};
      const std::array<std::string, 1> args{std::string(identity)};
      const Reply reply = client_->impl().eval(resign_script(), keys, args);
      if (reply.is_error()) return fmt::format("{}: resign: {}", client_->describe(), reply.text);
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  }

 private:
  std::shared_ptr<Client> client_;
  std::string leader_key_;
  std::string term_key_;
  std::string ttl_ms_;
};

ElectorOptions checked(ElectorOptions options, const std::shared_ptr<Client>& client) {
  if (!client) throw std::invalid_argument("redis::Elector: client is null");
  options.leader_key = trim(options.leader_key);
  if (options.leader_key.empty()) throw std::invalid_argument("redis::ElectorOptions.leader_key: empty");
  if (options.term_key.empty()) options.term_key = options.leader_key + ":term";
  if (options.term_key == options.leader_key) {
    throw std::invalid_argument("redis::ElectorOptions.term_key: the same key as leader_key");
  }
  const bool unprintable = std::any_of(options.holder.begin(), options.holder.end(), [](char c) {
    return static_cast<unsigned char>(c) <= ' ' || c == '\x7f';
  });
  if (options.holder.size() > 128 || unprintable) {
    throw std::invalid_argument(fmt::format("redis::ElectorOptions.holder: \"{}\" is not at most 128 bytes without "
                                            "whitespace or control characters",
                                            options.holder.substr(0, 80)));
  }
  return options;
}


}  // namespace

class FLEETCRON_LOCAL Elector::Impl {
 public:
  Impl(std::shared_ptr<Client> client, ElectorOptions options)
      : options_(checked(std::move(options), client)),
        lease_(std::make_shared<RedisLease>(std::move(client), options_),
               options_.holder.empty() ? random_hex(16) : options_.holder, options_.lease,
               "redis::ElectorOptions.lease") {
    options_.lease = lease_.options();  // the defaults resolved
  }
  ElectorOptions options_;
  LeaseElector lease_;
};

Elector::Elector(std::shared_ptr<Client> client, ElectorOptions options)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(options))) {}
Elector::~Elector() = default;
Leadership Elector::is_leader() { return impl_->lease_.is_leader(); }
void Elector::on_leadership_lost(std::function<void(std::uint64_t term)> lost) {
  impl_->lease_.on_leadership_lost(std::move(lost));
}
void Elector::resign() { impl_->lease_.resign(); }
void Elector::set_liveness(std::function<bool()> alive) { impl_->lease_.set_liveness(std::move(alive)); }
const std::string& Elector::identity() const noexcept { return impl_->lease_.identity(); }
ElectorState Elector::state() const { return impl_->lease_.state(); }
const ElectorOptions& Elector::options() const noexcept { return impl_->options_; }

}  // namespace fleetcron::redis
