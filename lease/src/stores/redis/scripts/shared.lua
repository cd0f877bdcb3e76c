-- Acquire a semaphore's permits or a side of a read-write lock, as a new hold or by re-entering
-- the hold the caller says it has. The primitive is a sorted set of its holds: each hold's id ->
-- what it takes (a semaphore: its permits; a read-write lock: 0 to read, 1 to write), and a
-- marker member naming the primitive (':semaphore', its score the permits last declared; or
-- ':rw'). Each hold is a hash of its own, laid out as a lock is (see acquire.lua), at
-- '<set>:h:<hold id>', with the lease as its TTL: a hold whose key lapsed is gone, and the next
-- acquisition drops it from the set.
-- KEYS[1]  the set of holds
-- KEYS[2]  the fencing counter: the last token handed out (never expires)
-- KEYS[3]  the epoch note (see acquire.lua)
-- KEYS[4]  the new hold's key
-- KEYS[5]  the key of the hold re-entered (KEYS[4] if none)
-- KEYS[6]  the waiting writer (a read-write lock): the owner id of a writer that waits, which
--          new readers let go first for as long as it lasts
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  this acquisition's id, unique; also the new hold's id
-- ARGV[4]  the id of the hold the caller holds and may re-enter, or ''
-- ARGV[5]  the epoch of the tokens (see acquire.lua)
-- ARGV[6]  'semaphore', 'read' or 'write'
-- ARGV[7]  a semaphore's permits, as this caller declares them (from 1)
-- ARGV[8]  the permits this acquisition takes (from 1 to ARGV[7])
-- ARGV[9]  how long a waiting writer's mark lasts, in milliseconds; '0': the caller does not wait
-- Reply    as acquire.lua: {1, 1, token} a new hold; {1, holds, token} a re-entry; {0, ttl} not
--          now, for about ttl ms (-1: unknown)
-- Errors   WRONGTYPE (also for a set that is another primitive's, or no primitive's), BADVALUE,
--          ERR (invalid lease, permits or epoch), EPOCH, NOPERM, PERMITS (a semaphore whose
--          holders declared another number of permits than ARGV[7]): before any write
local err = bad_lease(ARGV[1])
if err then
  return err
end
local kind = ARGV[6]
local marker = kind == 'semaphore' and ':semaphore' or ':rw'
local what = kind == 'semaphore' and 'semaphore (a sorted set)' or 'read-write lock (a sorted set)'
local permits, take = tonumber(ARGV[7]), tonumber(ARGV[8])
if kind == 'semaphore' and not (permits and take and take >= 1 and take <= permits) then
  return redis.error_reply('ERR invalid permits: from 1 to the semaphore\'s permits expected')
end
local unread = denied('zrange', KEYS[1], '0', '-1', 'withscores')
if unread then
  return unread
end
local members = redis.pcall('zrange', KEYS[1], 0, -1, 'withscores')
if is_wrong_type(members) then
  return wrong_type(KEYS[1], what)
end
if members.err then
  return members
end
local last, bad = fence_value(KEYS[2])
if bad then
  return bad
end
-- The holds that stand, and those whose keys lapsed.
local prefix = KEYS[1] .. ':h:'
local live, gone, marked, declared = {}, {}, #members == 0, nil
for i = 1, #members, 2 do
  local id, score = members[i], tonumber(members[i + 1])
  if string.sub(id, 1, 1) == ':' then
    if id ~= marker then
      return wrong_type(KEYS[1], what)
    end
    marked, declared = true, score
  elseif redis.call('exists', prefix .. id) == 1 then
    live[#live + 1] = {id, score}
  else
    gone[#gone + 1] = id
  end
end
if not marked then
  return wrong_type(KEYS[1], what)
end
-- A semaphore's number of permits is the one its holders declared: an acquisition declaring
-- another, while any of them holds, would be counted against a number they do not know of.
if kind == 'semaphore' and declared and declared ~= permits and #live > 0 then
  return redis.error_reply('PERMITS ' .. declared .. ' ' .. permits .. ' the holders of ' .. KEYS[1] ..
    ' declared ' .. declared .. ' permits, and this acquisition ' .. permits ..
    ': resize the semaphore to change its number')
end
local waiting = nil
if kind ~= 'semaphore' then
  waiting = redis.pcall('get', KEYS[6])
  if is_wrong_type(waiting) then
    return wrong_type(KEYS[6], 'waiting writer (a string)')
  end
  if type(waiting) == 'table' then
    return waiting
  end
end

if ARGV[4] ~= '' then
  local held, unreadable = lock_fields(KEYS[5], ':hold', ARGV[2], ':token')
  if unreadable then
    return unreadable
  end
  local again = reenter(KEYS[5], held, ARGV[2], ARGV[4], ARGV[3], ARGV[1], last)
  if again then
    return again
  end
end

-- Whether a new hold may be made now; if not, about how long until that may change.
local admit, wait = true, nil
local function lapses_in(key)
  local left = redis.call('pttl', key)
  if left >= 0 and (wait == nil or left < wait) then
    wait = left
  end
end
if kind == 'semaphore' then
  local used = 0
  for _, hold in ipairs(live) do
    used = used + hold[2]
  end
  if used + take > permits then
    admit = false
    for _, hold in ipairs(live) do
      lapses_in(prefix .. hold[1])
    end
  end
elseif kind == 'read' then
  -- A writer's own read is let in (a downgrade); anyone else's waits for the writer, and for a
  -- writer that waits.
  local writes = false
  for _, hold in ipairs(live) do
    if hold[2] == 1 then
      local mine = redis.pcall('hget', prefix .. hold[1], ARGV[2])
      if type(mine) == 'string' then
        writes = true
      else
        admit = false
        lapses_in(prefix .. hold[1])
      end
    end
  end
  if admit and not writes and waiting and waiting ~= ARGV[2] then
    admit = false
    lapses_in(KEYS[6])
  end
else
  for _, hold in ipairs(live) do
    admit = false
    lapses_in(prefix .. hold[1])
  end
end

if not admit then
  if kind == 'write' and ARGV[9] ~= '0' then
    local refused = denied('set', KEYS[6], ARGV[2], 'px', ARGV[9])
    if refused then
      return refused
    end
    redis.call('set', KEYS[6], ARGV[2], 'px', ARGV[9])
  end
  return {0, wait or -1}
end

local token, behind, note = token_after(last, ARGV[5], KEYS[3])
if behind then
  return behind
end
local score = kind == 'semaphore' and take or (kind == 'write' and 1 or 0)
local mark = kind == 'semaphore' and permits or 0
local refused = new_hold_denied(KEYS[4], KEYS[2], KEYS[3], note, ARGV[2], ARGV[3], token, ARGV[1])
  or denied('zadd', KEYS[1], score, ARGV[3]) or (#gone > 0 and denied('zrem', KEYS[1], gone[1]))
  or (kind == 'write' and waiting == ARGV[2] and denied('del', KEYS[6]))
if refused then
  return refused
end
for _, id in ipairs(gone) do
  redis.call('zrem', KEYS[1], id)
end
new_hold(KEYS[4], KEYS[2], KEYS[3], note, ARGV[2], ARGV[3], token, ARGV[1])
if declared ~= mark then
  redis.call('zadd', KEYS[1], mark, marker)
end
redis.call('zadd', KEYS[1], score, ARGV[3])
if kind == 'write' and waiting == ARGV[2] then
  redis.call('del', KEYS[6])
end
return {1, 1, token}
