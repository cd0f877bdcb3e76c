-- Stores a rate limiter's limit, whatever was stored: its grants so far count under the new one
-- (a window's log is kept, a cell rate's arrival time too). A limiter with nothing stored keeps
-- the limit for one window (period). A limit of the other mode replaces one whose grants no
-- longer count, with its state; while they count, it is refused.
-- KEYS[1], KEYS[2]  the limiter's hash and log (see limit_take.lua)
-- ARGV[1..4]  the limit to store (see limit_take.lua)
-- Reply    {0}: nothing was stored before; {1, mode, a, b, c}: the limit stored before;
--          {2, mode, a, b, c}: refused, the stored limit is of the other mode and its grants
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
local refused = denied('hset', KEYS[1], 'mode', 'window') or denied('del', KEYS[1]) or
  denied('del', KEYS[2]) or denied('pexpireat', KEYS[1], '1') or denied('pexpireat', KEYS[2], '1')
if refused then
  return refused
end
local now = clock(state.last)
local before = {0}
if state.mode then
  before = {1, state.mode, state.a, state.b, state.c}
end
if state.mode and state.mode ~= limit.mode then
  local counting
  if state.mode == 'window' then
    counting = in_window(KEYS[2], now, state.b) > 0
  else
    counting = state.tat ~= nil and state.tat > now
  end
  if counting then
    return {2, state.mode, state.a, state.b, state.c}
  end
  redis.call('del', KEYS[1], KEYS[2])
  state.tat = nil
end
redis.call('hset', KEYS[1], 'mode', limit.mode, 'a', digits(limit.a), 'b', digits(limit.b),
  'c', digits(limit.c))
-- Kept for a window (a period) from now, or until a cell rate's arrival time if later: every
-- grant in the log was made by now.
local lapses = now + limit.b
if limit.mode == 'cell' and state.tat and state.tat > lapses then
  lapses = state.tat
end
lapses = digits(div_ceil(lapses, 1000))
redis.call('pexpireat', KEYS[1], lapses)
redis.call('pexpireat', KEYS[2], lapses)
return before
