-- Takes grants of a rate limiter: judged and recorded by this server's clock in one step.
-- KEYS[1]  the limiter's hash: its stored limit ('mode', 'a', 'b', 'c', as ARGV gives them), the
--          last member number of its log ('seq'), a cell rate's theoretical arrival time ('tat'),
--          the clock at its last grant ('last'), when its limit lapses ('lapses': once no grant
--          counts) and when its keys expire ('expires', up to a window later), in microseconds
-- KEYS[2]  a window's log: sorted set of its grants, each a member (a number) scored by when it
--          was made (microseconds), those out of the window trimmed now and then; it expires
--          with the hash
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
-- A window's log is checked by the first write, below.
local state, failed = limiter_state(KEYS[1], nil)
if failed then
  return failed
end
local now = clock(state.last)
local stands = standing(state, now)
if stands and not same_limit(state, limit) then
  return {2, state.mode, state.a, state.b, state.c}
end

local now_digits = digits(now)

-- Records a grant in the hash: its own field (`field`, `value`: a window's last member number,
-- a cell rate's arrival time), the clock, when the limit lapses, the limit where it is not the
-- standing one, and when the keys expire if they are kept longer.
local function record(field, value, lapses, expires)
  if stands and not expires then
    redis.call('hset', KEYS[1], field, value, 'last', now_digits, 'lapses', lapses)
    return
  end
  local fields = {field, value, 'last', now_digits, 'lapses', lapses}
  if not stands then
    local more = {'mode', limit.mode, 'a', digits(limit.a), 'b', digits(limit.b), 'c',
      digits(limit.c)}
    for i = 1, #more do
      fields[#fields + 1] = more[i]
    end
  end
  if expires then
    fields[#fields + 1] = 'expires'
    fields[#fields + 1] = digits(expires)
  end
  redis.call('hset', KEYS[1], unpack(fields))
end

if limit.mode == 'window' then
  local window = limit.b
  -- A limiter whose limit lapsed keeps no grant (a log without its hash, which only a hash
  -- lost alone leaves, keeps those of the window).
  local lapsed = state.mode and not stands
  -- The grants in the window, read by a call that also finds a log of another type.
  local used = redis.pcall('zcount', KEYS[2], '(' .. digits(now - window), '+inf')
  if is_wrong_type(used) then
    return wrong_type(KEYS[2], 'rate limiter log (a sorted set)')
  end
  if type(used) == 'table' and used.err then
    return used
  end
  if lapsed then
    used = 0
  end
  if used + n > limit.a then
    -- The grants must wait for this many of those in the window to leave it.
    local leaving = used + n - limit.a
    local at = window_grant(KEYS[2], now, window, leaving)
    return {0, now, at + window - now, math.max(limit.a - used, 0)}
  end
  -- The grants out of the window are trimmed at one grant in 32 (and at every call for several
  -- at once), so that the log holds at most 31 grants more than the window's; a lapsed
  -- limit's, all of them, at once.
  local trim = lapsed or n > 1 or (state.seq + 1) % 32 == 0
  local expires = keep_until(state, now + window, window)
  local refused = denied('hset', KEYS[1], 'mode', 'window') or
    denied('zadd', KEYS[2], 'NX', '0', '1')
  if not refused and trim then
    refused = denied('zremrangebyscore', KEYS[2], '-inf', '0')
  end
  if not refused and expires then
    refused = denied('pexpireat', KEYS[1], '1') or denied('pexpireat', KEYS[2], '1')
  end
  if refused then
    return refused
  end
  if trim then
    local cut = digits(now - window)
    if lapsed then
      cut = '+inf'
    end
    redis.call('zremrangebyscore', KEYS[2], '-inf', cut)
  end
  -- One member per grant. A member number already in the log (its hash lost alone) is passed
  -- over, so that every grant is a record of its own.
  local seq, left = state.seq, n
  if n == 1 then
    seq = seq + 1
    left = left - redis.call('zadd', KEYS[2], 'NX', now_digits, digits(seq))
  end
  while left > 0 do
    local members = {}
    for i = 1, math.min(left, 1000) do
      members[#members + 1] = now_digits
      members[#members + 1] = digits(seq + i)
    end
    seq = seq + #members / 2
    left = left - redis.call('zadd', KEYS[2], 'NX', unpack(members))
  end
  record('seq', digits(seq), digits(now + window), expires)
  if expires then
    local ms = digits(expires / 1000)
    redis.call('pexpireat', KEYS[1], ms)
    redis.call('pexpireat', KEYS[2], ms)
  end
  return {1, now, limit.a - used - n}
end

-- A cell rate: each grant moves the theoretical arrival time on by one interval; a call is
-- granted if that time then runs at most the burst's span ahead of the clock.
local interval = cell_interval(limit.a, limit.b)
local span = limit.c * interval
local tat = now
if stands and state.tat and state.tat > now then
  tat = state.tat
end
local after = tat + n * interval
if after - now > span then
  local available = math.max(div_floor(span - (tat - now), interval), 0)
  return {0, now, after - now - span, available}
end
local expires = keep_until(state, after, limit.b)
local refused = denied('hset', KEYS[1], 'mode', 'cell')
if not refused and expires then
  refused = denied('pexpireat', KEYS[1], '1')
end
if refused then
  return refused
end
-- At the arrival time the limiter is as if new.
local after_digits = digits(after)
record('tat', after_digits, after_digits, expires)
if expires then
  redis.call('pexpireat', KEYS[1], digits(expires / 1000))
end
return {1, now, div_floor(span - (after - now), interval)}
