// Internal: what the claim and campaign scripts answer, checked strictly.
// A reply of any other shape is an error naming what was wrong, never a
// crash: fuzz/redis_reply_fuzz.cpp feeds these arbitrary replies.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redis/reply.h"

namespace fleetcron::redis::detail {

struct ClaimReply {
  std::string error;  // non-empty: malformed, the rest is meaningless
  std::chrono::microseconds offset{0};  // server time minus local time
  std::int64_t epoch_us = 0;            // the store's reset epoch (0: the call was refused for skew)
  std::uint64_t fence_counter = 0;      // the fence counter after the call
  bool reset_found = false;             // this call found the reset and wrote the epoch
  /// Per key: fence (> 0) claimed, 0 taken, -1 refused for clock skew,
  /// -2 refused as scheduled before the epoch + max skew.
  std::vector<std::int64_t> outcomes;
};
/// The claim script's answer for `keys` claim keys.
ClaimReply parse_claim_reply(const Reply& reply, std::size_t keys);

struct CampaignReply {
  std::string error;
  bool leader = false;
  std::uint64_t term = 0;  // > 0 when leader
};
CampaignReply parse_campaign_reply(const Reply& reply);

}  // namespace fleetcron::redis::detail
