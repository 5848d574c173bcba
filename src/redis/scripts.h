// Internal: the Lua scripts the claimer and the elector run. Numbers go
// back to Redis as strings with string.format('%.0f'): Lua 5.1's tostring()
// would write large integers in exponent notation.
#pragma once

namespace fleetcron::redis::detail {

// KEYS: the fence counter, then the claim keys. ARGV: TTL ms, local wall
// time µs, max skew µs. Returns {offset µs, r1, r2, ...} with one r per
// claim key: its fence (> 0) if claimed, 0 if taken, -1 if refused for
// clock skew (then nothing is written). Each claim is SET NX PX, as
// libtnb/cron's; fences increase in key order and never fall below the
// server's TIME in µs, so they keep growing even after Redis loses its data.
// One call claims many keys: the per-call cost is paid once per batch.
inline constexpr const char* claim_script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local offset = now - tonumber(ARGV[2])
local out = {offset}
if math.abs(offset) > tonumber(ARGV[3]) then
  for i = 2, #KEYS do out[i] = -1 end
  return out
end
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence < now then fence = now end
local granted = false
for i = 2, #KEYS do
  local candidate = string.format('%.0f', fence + 1)
  if redis.call('SET', KEYS[i], candidate, 'NX', 'PX', ARGV[1]) then
    fence = fence + 1
    out[i] = fence
    granted = true
  else
    out[i] = 0
  end
end
if granted then redis.call('SET', KEYS[1], string.format('%.0f', fence)) end
return out
)lua";

// KEYS: leader key, term counter. ARGV: identity, TTL ms, the term this
// elector holds (0: none), '1' to take the lease with a new term even if
// the key still names us. Returns {1, term} (leader) or {0, 0}. Same key
// and value as libtnb/cron: renew with PEXPIRE when the key holds our
// identity and we know our term, take it with SET PX when it is free (or
// ours but our term is unknown: the reply of the take was lost).
inline constexpr const char* campaign_script = R"lua(
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] and ARGV[4] ~= '1' and tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local term = tonumber(redis.call('GET', KEYS[2]) or '0')
  local known = tonumber(ARGV[3])
  if term < known then
    term = known
    redis.call('SET', KEYS[2], string.format('%.0f', term))
  end
  return {1, term}
end
if holder == false or holder == ARGV[1] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local term = redis.call('INCR', KEYS[2])
  if term < now then
    term = now
    redis.call('SET', KEYS[2], string.format('%.0f', term))
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, term}
end
return {0, 0}
)lua";

// KEYS: leader key. ARGV: identity. Deletes the lease only if it is ours.
inline constexpr const char* resign_script = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

}  // namespace fleetcron::redis::detail
