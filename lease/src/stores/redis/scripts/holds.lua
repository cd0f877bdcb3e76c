-- The steps on one hold that every primitive's scripts share. A hold is a hash (a lock's own key,
-- or a hold key of a semaphore or a read-write lock): owner id -> hold count, ':hold' -> the
-- hold's id, ':token' -> its fencing token, ':a:<id>' -> 1 for each acquisition not yet
-- released; its TTL is the lease. Prepended to the scripts after checks.lua; it defines
-- functions.

-- The first refusal among the commands that make `owner`'s new hold in `key` as the acquisition
-- `id` (also the hold's id), with the fencing token `token` written to the counter `counter` (and
-- the epoch note `note` to `note_key`, if there is one) and a lease of `lease` ms; nil if the
-- user may run them all. Asked before any write, with the script's other checks. (Plain
-- functions, not a closure per hold: a script runs for every acquisition.)
local function new_hold_denied(key, counter, note_key, note, owner, id, token, lease)
  return denied('set', counter, token) or (note and denied('set', note_key, note))
    or denied('hset', key, owner, 1, ':hold', id, ':token', token, ':a:' .. id, 1)
    or denied('pexpire', key, lease)
end

-- Makes the new hold that new_hold_denied checked, given the same arguments.
local function new_hold(key, counter, note_key, note, owner, id, token, lease)
  redis.call('set', counter, token)
  if note then
    redis.call('set', note_key, note)
  end
  redis.call('hset', key, owner, 1, ':hold', id, ':token', token, ':a:' .. id, 1)
  redis.call('pexpire', key, lease)
end

-- Re-enters `owner`'s hold `hold` in `key` as the acquisition `id`, extending its lease to
-- `lease` ms if less is left. `held` are the hold's ':hold', `owner` and ':token' fields as read
-- (see lock_fields), `last` the fencing counter. Returns the acquisition's reply ({1, holds,
-- token}, or the refusal of a command it needs), or nil if `hold` is not the hold there.
local function reenter(key, held, owner, hold, id, lease, last)
  if hold == '' or held[1] ~= hold or not held[2] then
    return nil
  end
  local refused = denied('hincrby', key, owner, 1) or denied('hset', key, ':a:' .. id, 1)
    or denied('pexpire', key, lease)
  if refused then
    return refused
  end
  local ttl = redis.call('pttl', key)
  local holds = redis.call('hincrby', key, owner, 1)
  redis.call('hset', key, ':a:' .. id, 1)
  if ttl < tonumber(lease) then
    redis.call('pexpire', key, lease)
  end
  return {1, holds, held[3] or last}
end

-- The largest counter value: at it no token is left to give (see fence_value).
local LAST_TOKEN = '9223372036854775807'

-- The last of `count` tokens from `first` (a token just drawn, `ceiling` the first past its
-- epoch's range, nil without epochs): `first` itself if `count` is not a whole number from 1 to
-- 999999, or if the range or the counter's end comes before the last.
local function block_end(first, ceiling, count)
  count = tonumber(count)
  if not count or count < 1 or count >= 1000000 or count ~= math.floor(count) then
    return first
  end
  local top = plus(first, count - 1)
  if (ceiling and not below(top, ceiling)) or not below(top, LAST_TOKEN) then
    return first
  end
  return top
end

-- Reserves the `count` tokens after `token`, just drawn for a new hold (`ceiling` as for
-- block_end), for the hold's client to hand on: moves the counter `counter` past them and returns
-- the last, or nil if none can be (`count` not a whole number from 1, the range's end). The
-- caller has checked that it may set the counter.
local function reserve_after(counter, token, ceiling, count)
  count = tonumber(count)
  if not count or count < 1 then
    return nil
  end
  local top = block_end(token, ceiling, count + 1)
  if top == token then
    return nil
  end
  redis.call('set', counter, top)
  return top
end

-- Reserves up to `count` fencing tokens for the hold that holds the lock now, which its client
-- hands from thread to thread without the server: the tokens after the counter `counter` (whose
-- checked value is `last`) in the epoch `source` names (`note_key` its note), and the counter
-- moves past them, so that no later hold is handed one. `ttl` is the lock's; `channel` is
-- counted with `numsub` ('numsub' or 'shardnumsub'). Returns the busy reply with the reserved
-- range and how many connections watch the channel ({0, ttl, first, last, subscribers}), or the
-- plain busy reply ({0, ttl}) if none can be reserved (the epoch's range is at its end, a command
-- is refused): nothing is written then.
local function reserve(counter, note_key, last, source, count, ttl, channel, numsub)
  local first, behind, note, ceiling = token_after(last, source, note_key)
  if behind then
    return {0, ttl}
  end
  local top = block_end(first, ceiling, count)
  if denied('set', counter, top) or (note and denied('set', note_key, note))
      or not redis.acl_check_cmd('pubsub', numsub, channel) then
    return {0, ttl}
  end
  redis.call('set', counter, top)
  if note then
    redis.call('set', note_key, note)
  end
  return {0, ttl, first, top, redis.call('pubsub', numsub, channel)[2]}
end

-- Releases the acquisition `id` of `owner`'s hold `hold` in `key`; `log` is the release log that
-- tells a retry of the release that ended a hold that it was applied. Returns the reply to give
-- now ({n} acquisitions left, {-1} not the owner's, {-2} applied already, or an error reply),
-- or nil if `id` is the hold's last acquisition, which the caller ends (nothing written yet).
local function release_one(key, log, owner, hold, id)
  local acquisition = ':a:' .. id
  local state, unreadable = lock_fields(key, ':hold', owner, acquisition)
  if unreadable then
    return unreadable
  end
  if state[1] ~= hold or not state[2] then
    if redis.pcall('get', log) == id then
      return {-2}
    end
    return {-1}
  end
  if not state[3] then
    return {-2}
  end
  local left = tonumber(state[2])
  if not left then
    return redis.error_reply('BADVALUE ' .. key .. ' has a hold count that is not a number')
  end
  if left <= 1 then
    return nil
  end
  local refused = denied('hincrby', key, owner, -1) or denied('hdel', key, acquisition)
  if refused then
    return refused
  end
  redis.call('hincrby', key, owner, -1)
  redis.call('hdel', key, acquisition)
  return {left - 1}
end
