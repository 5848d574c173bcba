// Internal: the Lua scripts the claimer and the elector run. Numbers go
// back to Redis as strings with string.format('%.0f'), or '%d' in the
// claim loop (half the cost; exact below 2^53 as a Lua number is): Lua
// 5.1's tostring() would write large integers in exponent notation.
#pragma once

namespace fleetcron::redis::detail {

// The store's epoch, as the claim and cursor scripts read it: the
// server's master_replid ('' where scripts may not call INFO), and a
// value with the epoch appended when there is one.
#define FLEETCRON_EPOCH_LUA \
  "local function store_epoch()\n" \
  "  local info = redis.pcall('INFO', 'replication')\n" \
  "  if type(info) ~= 'string' then return '' end\n" \
  "  return string.match(info, 'master_replid:(%x+)') or ''\n" \
  "end\n" \
  "local function with_epoch(value, epoch)\n" \
  "  if epoch == '' then return value end\n" \
  "  return value .. ' ' .. epoch\n" \
  "end\n"

// KEYS: the fence counter, the epoch record, then the claim keys. ARGV:
// TTL ms, local wall time µs, max skew µs, the highest fence this claimer
// has seen, then per claim key its scheduled instant in µs ('' if the key
// has none). Returns {offset µs, epoch µs, fence counter, 1 if this call
// found a reset else 0, r1, r2, ...} with one r per claim key: its fence
// (> 0) if claimed, 0 if taken, -1 if refused for clock skew (then nothing
// is written), -2 if refused because it is scheduled before epoch + max
// skew (see docs/reliability.md, "Store resets").
//
// The epoch record ("<epoch µs> <master_replid>") has no TTL. The store
// was reset (lost, or may have lost, recent writes) when the record is
// missing (empty restart, FLUSHALL, eviction), names another replication
// ID (a restart or a failover), or the fence counter is below a fence a
// claimer saw (the store went back). The call that finds it writes a new
// epoch, the server's TIME, in the same atomic step as its claims.
//
// Each claim is SET NX PX, as libtnb/cron's; a refused pre-epoch fire is
// still written (value 0) so that a Go replica sees it taken. Fences
// increase in key order and never fall below the server's TIME in µs nor
// below a fence a claimer saw, so they keep growing across resets.
inline constexpr const char* claim_script = FLEETCRON_EPOCH_LUA R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local offset = now - tonumber(ARGV[2])
local skew = tonumber(ARGV[3])
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
local out = {offset, 0, stored, 0}
if math.abs(offset) > skew then
  for i = 3, #KEYS do out[i + 2] = -1 end
  return out
end
local replid = store_epoch()
local epoch, seen = 0, ''
local record = redis.call('GET', KEYS[2])
if record then
  local e, r = string.match(record, '^(%d+) ?(%x*)$')
  epoch = tonumber(e or '0')
  seen = r or ''
end
local known = tonumber(ARGV[4])
local fence = stored
if epoch == 0 or seen ~= replid or stored < known then
  epoch = now
  if fence < known then fence = known end
  redis.call('SET', KEYS[2], string.format('%.0f', epoch) .. ' ' .. replid)
  out[4] = 1
end
out[2] = epoch
if fence < now then fence = now end
local limit = epoch + skew
local granted = false
for i = 3, #KEYS do
  local at = ARGV[i + 2]
  if at ~= '' and tonumber(at) < limit then
    redis.call('SET', KEYS[i], '0', 'NX', 'PX', ARGV[1])
    out[i + 2] = -2
  else
    local candidate = string.format('%d', fence + 1)  -- '%d': a long, exact below 2^53, and far cheaper than '%.0f'
    if redis.call('SET', KEYS[i], candidate, 'NX', 'PX', ARGV[1]) then
      fence = fence + 1
      out[i + 2] = fence
      granted = true
    else
      out[i + 2] = 0
    end
  end
end
if granted or out[4] == 1 then
  redis.call('SET', KEYS[1], string.format('%.0f', fence))
  out[3] = fence
end
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

// The fleet state's cursors (docs/fleet-state.md): "<instant µs> <schedule
// digest> <version> <claimant, or - after an advance> <epoch>", the version
// counting the record's writes and the epoch the server's master_replid
// (a new one on every restart and failover; absent in cursors of earlier
// versions, or where scripts may not call INFO). The digest and claimant
// pass through as strings; the instant is compared as a Lua number (exact
// to 2^53 µs, the year 2255). A key holding anything else is refused
// (NOTCURSOR), never overwritten.

// KEYS: the cursors of a claim batch's jobs. ARGV: three per cursor: the
// instant µs, the schedule digest, keep ms. Moves each cursor forward to
// its instant (a maximum: never back), with a version one higher and the
// store's epoch. Returns one answer per cursor: {1, new value} if it
// moved, {0, value} if it was already there or past it (its expiry is
// refreshed either way), {-1, error} if the key holds something other
// than a cursor (left as it is). One call for the batch: the epoch is read
// once.
inline constexpr const char* advance_cursor_script = FLEETCRON_EPOCH_LUA R"lua(
local epoch = nil
local out = {}
for i = 1, #KEYS do
  local instant, digest, keep = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local current = redis.pcall('GET', KEYS[i])  -- a key of another type fails its own cursor alone
  local version, done = 0, false
  if type(current) == 'table' and current.err then
    out[i] = {-1, 'NOTCURSOR the key holds something other than a cursor (' .. current.err .. ')'}
    done = true
  elseif current then
    local at, written = string.match(current, '^(%-?%d+) %d+ (%d+) %S+ ?%x*$')
    if not at then
      out[i] = {-1, 'NOTCURSOR the key holds something other than a cursor'}
      done = true
    elseif tonumber(at) >= tonumber(instant) then
      redis.call('PEXPIRE', KEYS[i], keep)
      out[i] = {0, current}
      done = true
    else
      version = tonumber(written)
    end
  end
  if not done then
    if epoch == nil then epoch = store_epoch() end
    local value = with_epoch(instant .. ' ' .. digest .. ' ' .. string.format('%.0f', version + 1) .. ' -', epoch)
    redis.call('SET', KEYS[i], value, 'PX', keep)
    out[i] = {1, value}
  end
end
return out
)lua";

// KEYS: the cursor. ARGV: the cursor read, as stored ('' when it was
// absent), instant µs, digest, keep ms, claimant. Returns {1, new value}
// when the cursor was still exactly as read, {2, new value} when it was but
// came from another epoch than the store's (rule 4: the caller runs
// nothing), else {0, current value or ''}. A cursor without an epoch is
// from another one when the store has one.
inline constexpr const char* catch_up_script = FLEETCRON_EPOCH_LUA R"lua(
local current = redis.call('GET', KEYS[1])
local version = 0
local written_epoch = ''
if current then
  local written, e = string.match(current, '^%-?%d+ %d+ (%d+) %S+ ?(%x*)$')
  if not written then return redis.error_reply('NOTCURSOR the key holds something other than a cursor') end
  version = tonumber(written)
  written_epoch = e
end
if (current or '') ~= ARGV[1] then return {0, current or ''} end
local epoch = store_epoch()
local value = with_epoch(ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. string.format('%.0f', version + 1) .. ' ' .. ARGV[5], epoch)
redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
if current and epoch ~= written_epoch then return {2, value} end
return {1, value}
)lua";

// KEYS: the fence counter, the epoch record. Declares a store new (`fleetcron
// init`): writes the epoch record "1 <master_replid>", an epoch before
// any fire, so nothing is refused as scheduled before a reset, unless the
// store already has an epoch record ({0, record}) or a fence counter, the
// mark of claims made here ({2, counter}). Returns {1, record} when it wrote.
inline constexpr const char* declare_new_store_script = FLEETCRON_EPOCH_LUA R"lua(
local record = redis.call('GET', KEYS[2])
if record then return {0, record} end
local counter = redis.call('GET', KEYS[1])
if counter then return {2, counter} end
record = '1 ' .. store_epoch()
redis.call('SET', KEYS[2], record)
return {1, record}
)lua";

#undef FLEETCRON_EPOCH_LUA

// KEYS: per record, its job's ledger index (a sorted set: fire key scored
// by its instant in µs) and records (a hash: fire key -> record). ARGV:
// per record eight: fire key, instant µs, record, its rank, keep count,
// keep-for µs, the keys' life ms, '1' to set that life. One call writes
// a batch of records, each alone: returns one answer per record, 2 when
// written as a new fire's, 1 when it replaced the fire's record, 0 when
// outranked, or an error's text (a key of another type,
// a field holding something other than a record) — that record alone is
// not written.
//
// A record is written unless the one kept for its fire key ranks as high
// (the rank is the record's first field). A fire already in the ledger
// (its running record, then its outcome) keeps its place and the keys'
// life: its record alone is replaced. A new fire's record is added
// (HSETNX: one command when the fire is new), and the ledger trimmed to
// the newest keep count and to keep-for before its newest instant (or
// before the server's TIME, if that is earlier: a record dated ahead by a
// replica's clock deletes nothing). The trim is looked at when the size,
// or the oldest record against this record's instant (against the newest
// when this record is the oldest), says there is something to trim: a
// record written among newer ones, none of them its ledger's oldest,
// leaves an age trim to the next write. The keys' life is set by the
// job's first new fire in the call when the caller asks (it refreshes a
// job's at most once a while, then asks for each of its records, for a
// life that long beyond keep-for) or when this write created them.
// A trim removes the ledger's oldest records first; one call trims at
// most 1,000 records in all, beyond 8 that each record may always trim (a
// keep lowered by thousands on hundreds of jobs would otherwise hold the
// server for seconds, and an ordinary trim must not wait for it): the
// rest goes with the ledgers' next writes.
inline constexpr const char* record_fires_script = R"lua(
local budget = 1000  -- records the call trims, beyond each record's own 8
local function trim(index, records, count, keep, keep_us)
  local allowed = math.max(budget, 8)
  local newest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local cutoff = math.min(tonumber(newest[2]), now_us) - keep_us
  local doomed = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. string.format('%.0f', cutoff), 'LIMIT', 0, allowed)
  local left = count - #doomed
  if left > keep and #doomed < allowed then
    local extra = redis.call('ZRANGE', index, #doomed, #doomed + math.min(left - keep, allowed - #doomed) - 1)
    for _, member in ipairs(extra) do doomed[#doomed + 1] = member end
  end
  budget = math.max(budget - #doomed, 0)
  if #doomed == 0 then return end
  redis.call('HDEL', records, unpack(doomed))
  redis.call('ZREM', index, unpack(doomed))
end
local function replace(records, field, record, rank)
  local existing = redis.call('HGET', records, field)
  local kept = string.match(existing, '^(%d+) ')
  if not kept then return 'NOTRECORD the ledger holds something other than a fire record' end
  if tonumber(kept) >= tonumber(rank) then return 0 end
  redis.call('HSET', records, field, record)
  return 1
end
local lived = {}  -- the indexes whose life this call set
local function write(index, records, a)
  local field, instant, record, rank = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3]
  local added = redis.pcall('HSETNX', records, field, record)
  if type(added) == 'table' then return added.err end
  if added == 0 then return replace(records, field, record, rank) end
  local placed = redis.pcall('ZADD', index, ARGV[a + 1], field)
  if type(placed) == 'table' then
    redis.call('HDEL', records, field)
    return placed.err
  end
  local count = redis.call('ZCARD', index)
  local keep, keep_us = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local oldest = redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')
  local due = count > keep or tonumber(oldest[2]) < instant - keep_us
  if not due and count > 1 and oldest[1] == field then  -- an old record written late: against the newest
    local newest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
    due = tonumber(oldest[2]) < tonumber(newest[2]) - keep_us
  end
  if due then trim(index, records, count, keep, keep_us) end
  if (ARGV[a + 7] == '1' or count == 1) and not lived[index] then
    redis.call('PEXPIRE', index, ARGV[a + 6])
    redis.call('PEXPIRE', records, ARGV[a + 6])
    lived[index] = true
  end
  return 2
end
local out = {}
for i = 1, #KEYS / 2 do out[i] = write(KEYS[2 * i - 1], KEYS[2 * i], 8 * i - 7) end
return out
)lua";

// KEYS: the ledger's index and records. ARGV: how many. Returns the newest
// records, newest instant first (HMGET in chunks: Lua's unpack() takes
// about 8,000 values at most).
inline constexpr const char* read_fires_script = R"lua(
local members = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #members == 0 then return {} end
local out = {}
for first = 1, #members, 1000 do
  local chunk = {unpack(members, first, math.min(first + 999, #members))}
  local records = redis.call('HMGET', KEYS[2], unpack(chunk))
  for i = 1, #chunk do
    if records[i] then out[#out + 1] = records[i] end
  end
end
return out
)lua";

// KEYS: a document (the controls, the replica registry). ARGV: "1" if the
// caller read it present, what it read, the new text ("" deletes it), and
// its time to live in ms ("0": none). Replaces it only if it is still what
// the caller read: 1, else 0 (a compare-and-swap).
inline constexpr const char* replace_document_script = R"lua(
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if current ~= ARGV[2] then return 0 end
elseif current then
  return 0
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
elseif ARGV[4] == '0' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
)lua";

}  // namespace fleetcron::redis::detail
