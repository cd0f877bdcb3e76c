-- Checks that every script runs before its first write: Redis does not roll a script back, so a
-- script that finds a key or an argument it cannot use, or a command its user may not run, must
-- fail before it has changed anything. The checks of keys ride on the reads the scripts make
-- anyway (under redis.pcall, which hands back a refusal instead of raising it); the user's rules
-- are asked once per command (redis.acl_check_cmd, Redis 7). This file is prepended to the
-- scripts that act on holds, after `access.lua`; it defines functions.

-- The fields `...` of the lock hash `key` (HMGET); or nil and an error reply if it cannot be
-- read, a key of another type named as such.
local function lock_fields(key, ...)
  local fields = redis.pcall('hmget', key, ...)
  if is_wrong_type(fields) then
    return nil, wrong_type(key, 'lock (a hash)')
  end
  if fields.err then
    return nil, fields
  end
  return fields, nil
end

-- An error reply unless `ms` is a lease in milliseconds the client could have sent, else nil.
local function bad_lease(ms)
  if not string.match(ms, '^[1-9]%d*$') or #ms > 12 then
    return redis.error_reply('ERR invalid lease: a whole number of milliseconds is expected')
  end
  return nil
end

-- The fencing counter `key` as a decimal string ('0' if absent); or nil and an error reply if it
-- is of another type, not a whole number from 0, or at 2^63 - 1 (no token left to give).
local function fence_value(key)
  local value = redis.pcall('get', key)
  if is_wrong_type(value) then
    return nil, wrong_type(key, 'counter')
  end
  if type(value) == 'table' then
    return nil, value
  end
  if not value then
    return '0', nil
  end
  if #value > 19 or not (value == '0' or string.match(value, '^[1-9]%d*$')) then
    return nil, redis.error_reply('BADVALUE ' .. key .. ' is not a whole number from 0')
  end
  if #value == 19 and value >= '9223372036854775807' then
    return nil, redis.error_reply('BADVALUE ' .. key ..
      ' has reached the largest fencing token (2^63 - 1)')
  end
  return value, nil
end

-- The decimal string one above `digits` (a checked counter value), computed on the digits:
-- Lua numbers are doubles, which cannot hold every token exactly.
local function increment(digits)
  local bytes = {string.byte(digits, 1, -1)}
  local i = #bytes
  while i >= 1 and bytes[i] == 57 do
    bytes[i] = 48
    i = i - 1
  end
  if i == 0 then
    return '1' .. string.char(unpack(bytes))
  end
  bytes[i] = bytes[i] + 1
  return string.char(unpack(bytes))
end

-- The decimal string `n` above `digits` (a checked counter value), for a small `n` (below
-- 10^6): in a double while that is exact (up to 15 digits), else on the last six digits.
local function plus(digits, n)
  if #digits <= 15 then
    return string.format('%.0f', tonumber(digits) + n)
  end
  local tail = tonumber(string.sub(digits, -6)) + n
  local head = string.sub(digits, 1, -7)
  if tail >= 1000000 then
    head = increment(head)
    tail = tail - 1000000
  end
  return head .. string.format('%06d', tail)
end

-- Whether the decimal string `a` is below `b` (both whole numbers without leading zeros).
local function below(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- 2^44: a token is its epoch times this, plus a count within the epoch.
local EPOCH_SPAN = 17592186044416
-- Epochs stay below 2^19, so that every token stays below 2^63.
local EPOCH_LIMIT = 524288

-- This cluster node's configuration epoch (a decimal string, or nil if unreadable). `CLUSTER
-- INFO` is slow (Redis 7.0 counts the states of all 16384 slots), so the epoch is noted in the key
-- `note` beside the node's replication id ('<replid>:<epoch>'), and read from the note while the
-- id is the same. A promotion always gives a node a new replication id, and a note travels with
-- the slot's keys (replicated, migrated) but is only believed by the node that wrote it, in the
-- same term as primary: there it is an epoch the node had, never above the one it has now (epochs
-- do not fall). `fresh` skips the note. Returns the epoch, whether it came from the note, the note
-- to write if it was read afresh (nil if the node's id cannot be read), and an error reply.
local function node_epoch(note, fresh)
  local info = redis.pcall('info', 'replication')
  local id = type(info) == 'string' and string.match(info, 'master_replid:(%x+)') or nil
  if id and not fresh then
    local noted = redis.pcall('get', note)
    if is_wrong_type(noted) then
      return nil, false, nil, wrong_type(note, 'epoch note (a string)')
    end
    if type(noted) == 'string' then
      local noted_id, epoch = string.match(noted, '^(%x+):(%d+)$')
      if noted_id == id then
        return epoch, true, nil, nil
      end
    end
  end
  local epoch = string.match(redis.call('cluster', 'info'), 'cluster_my_epoch:(%d+)')
  return epoch, false, id and epoch and (id .. ':' .. epoch), nil
end

-- The range of tokens of the epoch `source` names: '' for none (tokens from 1 without end), a
-- whole number the client established (a Sentinel configuration epoch), or 'cluster' for this
-- node's own configuration epoch (see node_epoch; `note`, `fresh` as there). Returns the range's
-- first token and the first one past it (nil without epochs) as decimal strings, whether the
-- epoch came from the note, the note to write, and an error reply (the rest nil if there is one).
local function epoch_range(source, note, fresh)
  if source == '' then
    return '0', nil, false, nil, nil
  end
  local epoch, noted, write
  if source == 'cluster' then
    local bad
    epoch, noted, write, bad = node_epoch(note, fresh)
    if bad then
      return nil, nil, false, nil, bad
    end
  else
    epoch = string.match(source, '^%d+$')
  end
  if not epoch or #epoch > 6 or tonumber(epoch) >= EPOCH_LIMIT then
    return nil, nil, false, nil,
      redis.error_reply('ERR invalid epoch: a whole number below 2^19 is expected')
  end
  local n = tonumber(epoch)
  return string.format('%.0f', n * EPOCH_SPAN), string.format('%.0f', (n + 1) * EPOCH_SPAN),
    noted, write, nil
end

-- The next fencing token after `last` (a checked counter value) in the epoch `source` names: one
-- above `last`, or the epoch's first token if that is higher. Or nil and an error reply if the
-- counter has reached the end of the epoch's range (the epoch the caller gave is behind, or the
-- epoch handed out all its tokens): a token from a lower range could repeat one handed out
-- before a failover. An epoch from the note (see node_epoch) that the counter is past is read
-- afresh first. The third value is the epoch note to write with the token, or nil; the fourth
-- the first token past the epoch's range, or nil without epochs.
local function token_after(last, source, note)
  local fresh = false
  while true do
    local floor, ceiling, noted, write, bad = epoch_range(source, note, fresh)
    if bad then
      return nil, bad, nil
    end
    local token = increment(last)
    if below(token, floor) then
      token = floor
    end
    if not ceiling or below(token, ceiling) then
      return token, nil, write, ceiling
    end
    if not noted then
      return nil, redis.error_reply('EPOCH the fencing counter is past the range of epoch ' ..
        source .. ': its tokens could repeat; the epoch must be read again'), nil
    end
    fresh = true
  end
end

-- A fair lock's line of waiters (see acquire.lua): `queue` orders the waiting owners by when they
-- first asked (strictly: one asking in the same millisecond as the last comes after it), `places`
-- by when their place lapses. `owner` asks now, keeping its place for `place_ms` more if `waits`.
-- Returns a table: `bad`, an error reply if a key cannot be read; `behind`, whether a waiter whose
-- place lasts asked before `owner`; `denied()`, the refusal of a command the line needs, else nil;
-- `leave()`, which takes `owner` (and every lapsed place) out of the line; `wait(ttl)`, which keeps
-- `owner`'s place if it waits and returns the reply for "not now" (for about `ttl` ms, or until
-- the first place lapses).
local function fair_line(queue, places, owner, place_ms, waits)
  local line = {}
  local unread = denied('zrangebyscore', places, '-inf', '+inf')
    or (not redis.acl_check_cmd('time') and redis.error_reply(
      'NOPERM this user may not run time, which a fair lock needs; nothing was written'))
  if unread then
    line.bad = unread
    return line
  end
  local now = redis.call('time')
  now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local lapsed = redis.pcall('zrangebyscore', places, '-inf', '(' .. now)
  if is_wrong_type(lapsed) then
    line.bad = wrong_type(places, 'fair lock\'s places (a sorted set)')
    return line
  end
  local first = redis.pcall('zrange', queue, 0, #lapsed + 1)
  if is_wrong_type(first) then
    line.bad = wrong_type(queue, 'fair lock\'s queue (a sorted set)')
    return line
  end
  local gone = {}
  for _, waiter in ipairs(lapsed) do
    gone[waiter] = true
  end
  local head = nil
  for _, waiter in ipairs(first) do
    if not gone[waiter] then
      head = waiter
      break
    end
  end
  line.behind = head ~= nil and head ~= owner
  local arrived = redis.call('zscore', queue, owner)
  function line.denied()
    return denied('zrem', queue, owner) or denied('zrem', places, owner)
      or denied('zadd', queue, now, owner) or denied('zadd', places, now, owner)
  end
  function line.leave()
    for _, waiter in ipairs(lapsed) do
      redis.call('zrem', queue, waiter)
      redis.call('zrem', places, waiter)
    end
    redis.call('zrem', queue, owner)
    redis.call('zrem', places, owner)
  end
  function line.wait(ttl)
    if waits then
      local refused = line.denied()
      if refused then
        return refused
      end
      for _, waiter in ipairs(lapsed) do
        redis.call('zrem', queue, waiter)
        redis.call('zrem', places, waiter)
      end
      if not arrived then
        -- Behind the last to arrive even within the same millisecond: the queue's order is the
        -- order of arrival, never of owner ids.
        local last = redis.call('zrange', queue, -1, -1, 'WITHSCORES')
        local at = now
        if last[2] and tonumber(last[2]) >= at then
          at = tonumber(last[2]) + 1
        end
        redis.call('zadd', queue, at, owner)
      end
      redis.call('zadd', places, now + tonumber(place_ms), owner)
    end
    if ttl == nil then
      -- Free, but another's turn: until that waiter's place lapses, if it does not take it.
      local lapse = redis.call('zscore', places, head)
      ttl = lapse and math.max(1, tonumber(lapse) - now) or 1
    end
    return {0, ttl}
  end
  return line
end
