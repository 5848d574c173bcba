#include "redis/replies.h"

#include <fmt/format.h>

namespace fleetcron::redis::detail {

namespace {

std::string shape(const Reply& reply) {
  if (reply.type == Reply::Type::array) return fmt::format("an array of {}", reply.elements.size());
  if (reply.type == Reply::Type::error) return "error " + reply.text;
  return std::string("a ") + std::string(to_string(reply.type));
}

}  // namespace

ClaimReply parse_claim_reply(const Reply& reply, std::size_t keys) {
  constexpr std::size_t header = 4;  // offset, epoch, fence counter, reset found
  ClaimReply out;
  if (reply.type != Reply::Type::array || reply.elements.size() != keys + header) {
    out.error = fmt::format("claim script answered {}, expected an array of {} integers", shape(reply), keys + header);
    return out;
  }
  for (std::size_t i = 0; i < reply.elements.size(); ++i) {
    const Reply& element = reply.elements[i];
    const bool valid = element.type == Reply::Type::integer &&
                       (i == 0 || (i < header ? element.integer >= 0 : element.integer >= -2)) &&
                       (i != 3 || element.integer <= 1);
    if (!valid) {
      out.error = fmt::format("claim script answered {} at position {}", shape(element), i);
      out.outcomes.clear();
      return out;
    }
    switch (i) {
      case 0: out.offset = std::chrono::microseconds{element.integer}; break;
      case 1: out.epoch_us = element.integer; break;
      case 2: out.fence_counter = static_cast<std::uint64_t>(element.integer); break;
      case 3: out.reset_found = element.integer == 1; break;
      default: out.outcomes.push_back(element.integer); break;
    }
  }
  return out;
}

CampaignReply parse_campaign_reply(const Reply& reply) {
  CampaignReply out;
  if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::integer || reply.elements[1].type != Reply::Type::integer) {
    out.error = fmt::format("campaign script answered {}, expected an array of 2 integers", shape(reply));
    return out;
  }
  const long long status = reply.elements[0].integer;
  const long long term = reply.elements[1].integer;
  if (status == 1 && term > 0) {
    out.leader = true;
    out.term = static_cast<std::uint64_t>(term);
  } else if (status != 0) {
    out.error = fmt::format("campaign script answered status {} with term {}", status, term);
  }
  return out;
}

}  // namespace fleetcron::redis::detail
