-- Reads a rate limiter, writing nothing: what counts now, by the standing limit (or the
-- declared one, if none stands).
-- KEYS[1], KEYS[2]  the limiter's hash and log (see limit_take.lua)
-- ARGV[1..4]  the limit declared (see limit_take.lua)
-- Reply    {now, stored, mode, a, b, c, used, available, next}: `stored` 1 if the limit is the
--          standing one, 0 if the declared one; `used` the grants that count now (a cell rate's
--          cells ahead of the clock, rounded up); `next` the microseconds until one grant could
--          be had, or -1 if one can now
-- Errors   WRONGTYPE, ERR invalid ...
local limit, bad = declared_limit()
if bad then
  return bad
end
local state, failed = limiter_state(KEYS[1], KEYS[2])
if failed then
  return failed
end
local now = clock(state.last)
local stored = 0
if standing(state, now) then
  limit = {mode = state.mode, a = state.a, b = state.b, c = state.c}
  stored = 1
end
local used, available, next = 0, 0, -1
if limit.mode == 'window' then
  -- A lapsed limit's grants count no more (a log without its hash, which only a hash lost
  -- alone leaves, counts as a take would count it).
  if stored == 1 or not state.mode then
    used = in_window(KEYS[2], now, limit.b)
  end
  available = math.max(limit.a - used, 0)
  if available == 0 then
    next = window_grant(KEYS[2], now, limit.b, used + 1 - limit.a) + limit.b - now
  end
else
  local interval = cell_interval(limit.a, limit.b)
  local span = limit.c * interval
  local ahead = 0
  if stored == 1 and state.tat and state.tat > now then
    ahead = state.tat - now
  end
  used = div_ceil(ahead, interval)
  available = math.max(div_floor(span - ahead, interval), 0)
  if available == 0 then
    next = ahead + interval - span
  end
end
return {now, stored, limit.mode, limit.a, limit.b, limit.c, used, available, next}
