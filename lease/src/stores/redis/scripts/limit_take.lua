-- Takes grants of a rate limiter: judged and recorded by this server's clock in one step.
-- KEYS[1]  the limiter's hash: its stored limit ('mode', 'a', 'b', 'c', as ARGV gives them), the
--          last member number of its log ('seq'), a cell rate's theoretical arrival time ('tat',
--          microseconds), the clock at its last grant ('last'); it lapses when the limiter's last
--          grant stops counting
-- KEYS[2]  a window's log: sorted set of its grants, each a member (a number) scored by when it
--          was made (microseconds); it lapses with the hash
-- ARGV[1]  the mode declared: 'window' or 'cell'
-- ARGV[2..4]  its numbers: a window's limit, length (microseconds) and 0; a cell rate's rate,
--          period (microseconds) and burst
-- ARGV[5]  the grants asked for: from 1 to the limit (a cell rate's burst)
-- Reply    {1, now, available}: granted at `now`, `available` left then;
--          {0, now, wait, available}: not granted, nothing recorded; they could be had in `wait`
--          microseconds at the earliest, and `available` could be now;
--          {2, mode, a, b, c}: the limiter stores another limit; nothing written
-- Errors   WRONGTYPE, NOPERM, ERR invalid ...: before any write
local limit, bad = declared_limit()
if bad then
  return bad
end
local n = tonumber(ARGV[5])
local most = limit.a
if limit.mode == 'cell' then
  most = limit.c
end
if not whole(n) or n > most then
  return redis.error_reply('ERR invalid grants: from 1 to the limit expected')
end
local state, failed = limiter_state(KEYS[1], KEYS[2])
if failed then
  return failed
end
if state.mode and not same_limit(state, limit) then
  return {2, state.mode, state.a, state.b, state.c}
end
local refused = denied('hset', KEYS[1], 'mode', 'window') or denied('pexpireat', KEYS[1], '1')
if not refused and limit.mode == 'window' then
  refused = denied('zremrangebyscore', KEYS[2], '-inf', '0') or
    denied('zadd', KEYS[2], 'NX', '0', '1') or denied('pexpireat', KEYS[2], '1')
end
if refused then
  return refused
end
local now = clock(state.last)

if limit.mode == 'window' then
  local window = limit.b
  redis.call('zremrangebyscore', KEYS[2], '-inf', digits(now - window))
  local used = redis.call('zcard', KEYS[2])
  if used + n > limit.a then
    -- The grants must wait for this many of those in the window to leave it.
    local leaving = used + n - limit.a
    local found = redis.call('zrange', KEYS[2], leaving - 1, leaving - 1, 'withscores')
    return {0, now, tonumber(found[2]) + window - now, math.max(limit.a - used, 0)}
  end
  -- One member per grant. A member number already in the log (its hash lost alone) is passed
  -- over, so that every grant is a record of its own.
  local seq, left = state.seq, n
  while left > 0 do
    local members = {}
    for i = 1, math.min(left, 1000) do
      members[#members + 1] = digits(now)
      members[#members + 1] = digits(seq + i)
    end
    seq = seq + #members / 2
    left = left - redis.call('zadd', KEYS[2], 'NX', unpack(members))
  end
  redis.call('hset', KEYS[1], 'mode', 'window', 'a', digits(limit.a), 'b', digits(window),
    'c', '0', 'seq', digits(seq), 'last', digits(now))
  -- Every grant has left the window when the clock passes the newest one's time by a window.
  local lapses = digits(div_ceil(now + window, 1000))
  redis.call('pexpireat', KEYS[1], lapses)
  redis.call('pexpireat', KEYS[2], lapses)
  return {1, now, limit.a - used - n}
end

-- A cell rate: each grant moves the theoretical arrival time on by one interval; a call is
-- granted if that time then runs at most the burst's span ahead of the clock.
local interval = cell_interval(limit.a, limit.b)
local span = limit.c * interval
local tat = state.tat
if not tat or tat < now then
  tat = now
end
local after = tat + n * interval
if after - now > span then
  local available = math.max(div_floor(span - (tat - now), interval), 0)
  return {0, now, after - now - span, available}
end
redis.call('hset', KEYS[1], 'mode', 'cell', 'a', digits(limit.a), 'b', digits(limit.b),
  'c', digits(limit.c), 'tat', digits(after), 'last', digits(now))
-- At the arrival time the limiter is as if new.
redis.call('pexpireat', KEYS[1], digits(div_ceil(after, 1000)))
return {1, now, div_floor(span - (after - now), interval)}
