-- Stores a rate limiter's limit, whatever stands: its grants so far count under the new one (a
-- window's log is kept, a cell rate's arrival time too). The limit stands for a window (a
-- period) from now, or until a cell rate's arrival time if later. A limit of the other mode
-- replaces one whose grants no longer count, with its state; while they count, it is refused.
-- A limiter whose limit lapsed keeps nothing of before.
-- KEYS[1], KEYS[2]  the limiter's hash and log (see limit_take.lua)
-- ARGV[1..4]  the limit to store (see limit_take.lua)
-- Reply    {0}: no limit stood before; {1, mode, a, b, c}: the limit that stood before;
--          {2, mode, a, b, c}: refused, the standing limit is of the other mode and its grants
--          still count; nothing written
-- Errors   WRONGTYPE, NOPERM, ERR invalid ...: before any write
local limit, bad = declared_limit()
if bad then
  return bad
end
local state, failed = limiter_state(KEYS[1], KEYS[2])
if failed then
  return failed
end
local now = clock(state.last)
local stands = standing(state, now)
local before = {0}
-- Whether nothing of before counts: a limit that lapsed, or one of the other mode whose grants
-- no longer count (a log without its hash, which only a hash lost alone leaves, is kept).
local fresh = state.mode ~= nil and not stands
if stands then
  before = {1, state.mode, state.a, state.b, state.c}
  if state.mode ~= limit.mode then
    local counting
    if state.mode == 'window' then
      counting = in_window(KEYS[2], now, state.b) > 0
    else
      counting = state.tat ~= nil and state.tat > now
    end
    if counting then
      return {2, state.mode, state.a, state.b, state.c}
    end
    fresh = true
  end
end
local lapses = now + limit.b
if not fresh and limit.mode == 'cell' and state.tat and state.tat > lapses then
  lapses = state.tat
end
local expires = keep_until(state, lapses, limit.b)
local refused = denied('hset', KEYS[1], 'mode', 'window') or denied('del', KEYS[2])
if not refused and expires then
  refused = denied('pexpireat', KEYS[1], '1') or denied('pexpireat', KEYS[2], '1')
end
if refused then
  return refused
end
-- The clock of this write: no later grant is recorded before it.
local fields = {'mode', limit.mode, 'a', digits(limit.a), 'b', digits(limit.b),
  'c', digits(limit.c), 'lapses', digits(lapses), 'last', digits(now)}
if fresh then
  -- Nothing of before counts: no grant in the log, no arrival time.
  redis.call('del', KEYS[2])
  fields[#fields + 1] = 'tat'
  fields[#fields + 1] = '0'
end
if expires then
  fields[#fields + 1] = 'expires'
  fields[#fields + 1] = digits(expires)
end
redis.call('hset', KEYS[1], unpack(fields))
if expires then
  local ms = digits(expires / 1000)
  redis.call('pexpireat', KEYS[1], ms)
  redis.call('pexpireat', KEYS[2], ms)
end
return before
