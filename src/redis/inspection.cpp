#include "fleetcron/redis/inspection.h"

#include <fmt/format.h>

#include "redis/commands.h"

namespace fleetcron::redis {

namespace {

// An error reply is the answer to report (NOAUTH, NOPERM, …), not "none".
Reply checked(Reply reply, const Client::Impl& client) {
  if (!reply.is_error()) return reply;
  const std::string message = fmt::format("{}: {}", client.description(), reply.text);
  if (reply.is_error("NOAUTH") || reply.is_error("NOPERM") || reply.is_error("WRONGPASS")) throw AuthError(message);
  throw ProtocolError(message);
}

// The prefix as a literal in a SCAN MATCH pattern: glob characters escaped.
std::string glob_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

LeaseRecord read_lease(Client& client, std::string_view leader_key, std::string_view term_key) {
  Client::Impl& redis = client.impl();
  const std::string term = term_key.empty() ? std::string(leader_key) + ":term" : std::string(term_key);
  const Reply holder = checked(redis.command({"GET", leader_key}), redis);
  const Reply ttl = checked(redis.command({"PTTL", leader_key}), redis);
  const Reply counter = checked(redis.command({"GET", term}), redis);
  LeaseRecord record;
  if (holder.type == Reply::Type::string) record.holder = holder.text;
  if (counter.type == Reply::Type::string) record.term = counter.text;
  record.expires_in = std::chrono::milliseconds{ttl.type == Reply::Type::integer ? ttl.integer : 0};
  return record;
}

std::size_t scan_claims(Client& client, std::string_view claim_prefix,
                        const std::function<void(std::string_view fire_key)>& visit, std::size_t limit) {
  Client::Impl& redis = client.impl();
  const std::string pattern = glob_literal(claim_prefix) + "*@*";
  std::string cursor = "0";
  std::size_t scanned = 0;
  do {
    const Reply page = checked(redis.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}), redis);
    if (page.type != Reply::Type::array || page.elements.size() != 2) {
      throw ProtocolError(fmt::format("{}: SCAN answered {}, not a cursor and a page", redis.description(),
                                      to_string(page.type)));
    }
    cursor = page.elements[0].text;
    for (const Reply& element : page.elements[1].elements) {
      ++scanned;
      const std::string_view key = element.text;
      if (!key.starts_with(claim_prefix)) continue;
      const std::string_view fire_key = key.substr(claim_prefix.size());
      if (fire_key.find('@') != std::string_view::npos) visit(fire_key);
    }
  } while (cursor != "0" && scanned < limit);
  return scanned;
}

}  // namespace fleetcron::redis
