// Fuzzes the Redis reply path: bytes from the wire go through hiredis's
// reader, fleetcron's decoder, and the claim and campaign reply checks.
// Any reply must decode, and be either well-formed or a named error.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "redis/connection.h"
#include "redis/replies.h"

namespace {

// hiredis 0.14's reader allocates an array for whatever element count a
// reply announces (1.0 added a limit): skip inputs announcing huge arrays
// or strings, which only exhaust the fuzzer's memory inside hiredis.
bool announces_huge(const std::uint8_t* data, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] != '*' && data[i] != '$') continue;
    std::size_t digits = 0;
    while (i + 1 + digits < size && data[i + 1 + digits] >= '0' && data[i + 1 + digits] <= '9') ++digits;
    if (digits > 5) return true;  // 100,000 or more
  }
  return false;
}

struct FreeReader {
  void operator()(redisReader* reader) const noexcept { redisReaderFree(reader); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fleetcron::redis;
  if (announces_huge(data, size)) return 0;
  std::unique_ptr<redisReader, FreeReader> reader(redisReaderCreate());
  if (redisReaderFeed(reader.get(), reinterpret_cast<const char*>(data), size) != REDIS_OK) return 0;  // NOLINT
  for (int replies = 0; replies < 64; ++replies) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) break;
    const Reply reply = detail::decode(*static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    const std::size_t keys = reply.elements.empty() ? 0 : reply.elements.size() - 1;
    const auto claim = detail::parse_claim_reply(reply, keys);
    if (claim.error.empty() && claim.outcomes.size() != keys) __builtin_trap();
    if (!claim.error.empty() && !claim.outcomes.empty()) __builtin_trap();
    const auto campaign = detail::parse_campaign_reply(reply);
    if (campaign.error.empty() && campaign.leader && campaign.term == 0) __builtin_trap();
  }
  return 0;
}
