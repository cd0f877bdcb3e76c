-- What the rate limiter's scripts share (prepended to each of them, after checks.lua): the
-- limit a call declares, the limiter's state read and checked, this server's clock, and the
-- arithmetic of the two modes. Times are whole microseconds of this server's clock (TIME) since
-- the Unix epoch, exact in Lua's numbers (below 2^53); every number goes to Redis as digits,
-- never through Lua's own conversion, which keeps 14 of them.

-- `x`, a whole number, as the digits Redis is given.
local function digits(x)
  return string.format('%.0f', x)
end

-- Whether `x` is a whole number from 1 below 2^53.
local function whole(x)
  return x ~= nil and x >= 1 and x == math.floor(x) and x < 9007199254740992
end

-- The whole part of x / y (x from 0, y from 1, both whole), exact.
local function div_floor(x, y)
  local q = math.floor(x / y)
  while q * y > x do
    q = q - 1
  end
  while (q + 1) * y <= x do
    q = q + 1
  end
  return q
end

-- x / y rounded up (x from 0, y from 1, both whole), exact.
local function div_ceil(x, y)
  local q = div_floor(x, y)
  if q * y < x then
    q = q + 1
  end
  return q
end

-- The limit the call declares (ARGV[1] the mode, 'window' or 'cell'; ARGV[2..4] its numbers: a
-- window's limit, length in microseconds and 0, or a cell rate's rate, period in microseconds
-- and burst); or nil and an error reply.
local function declared_limit()
  local mode = ARGV[1]
  local a, b, c = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local fits = whole(a) and whole(b) and c ~= nil
  if mode == 'window' then
    fits = fits and c == 0
  elseif mode == 'cell' then
    fits = fits and whole(c) and a <= b
  else
    fits = false
  end
  if not fits then
    return nil, redis.error_reply('ERR invalid rate limit: a mode and three whole numbers expected')
  end
  return {mode = mode, a = a, b = b, c = c}, nil
end

-- Whether the stored limit of `state` is `limit`.
local function same_limit(state, limit)
  return state.mode == limit.mode and state.a == limit.a and state.b == limit.b and
    state.c == limit.c
end

-- The limiter's state, from its hash `hash`: its stored limit (mode, a, b, c), the last member
-- number of its log (seq), a cell rate's theoretical arrival time (tat), the clock when it last
-- granted (last), when its stored limit lapses (lapses: once no grant counts) and when its keys
-- do (expires, later); or nil and an error reply for a key of another type (the hash, or the
-- log `log` if given: a caller that writes the log first may let that write find it instead).
-- Times are microseconds.
local function limiter_state(hash, log)
  local fields = redis.pcall('hmget', hash, 'mode', 'a', 'b', 'c', 'seq', 'tat', 'last',
    'lapses', 'expires')
  if is_wrong_type(fields) then
    return nil, wrong_type(hash, 'rate limiter (a hash)')
  end
  if fields.err then
    return nil, fields
  end
  if log then
    local kind = redis.call('type', log)['ok']
    if kind ~= 'none' and kind ~= 'zset' then
      return nil, wrong_type(log, 'rate limiter log (a sorted set)')
    end
  end
  return {
    mode = fields[1] or nil,
    a = tonumber(fields[2]),
    b = tonumber(fields[3]),
    c = tonumber(fields[4]),
    seq = tonumber(fields[5]) or 0,
    tat = tonumber(fields[6]),
    last = tonumber(fields[7]),
    lapses = tonumber(fields[8]),
    expires = tonumber(fields[9]),
  }, nil
end

-- Whether the stored limit of `state` still stands at `now`: some grant still counts (or a
-- reconfiguration's window lasts). A limiter whose limit lapsed is as good as new, whatever its
-- keys still hold until they expire.
local function standing(state, now)
  return state.mode ~= nil and state.lapses ~= nil and state.lapses > now
end

-- The time (microseconds, on whole milliseconds) the limiter's keys are to expire at, if they
-- must be kept longer than they are to last past `lapses`: one `span` more, so that they are
-- kept longer about once a span rather than at every call; nil if they are kept long enough.
local function keep_until(state, lapses, span)
  if state.expires and state.expires >= lapses then
    return nil
  end
  local ms = div_ceil(lapses + span, 1000)
  return ms * 1000
end

-- Now on this server's clock, never before the last call that wrote to the limiter (a grant, a
-- reconfiguration): a clock stepped back holds the limiter there until the clock catches up, so
-- that no grant is recorded before a time that a grant was made, or a grant deleted, at (and
-- each counts for a whole window, or interval, from its own time). Calls that write nothing
-- (refusals, reads) judge by it and leave it.
local function clock(last)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if last and last > now then
    return last
  end
  return now
end

-- A cell rate's emission interval: its period over its rate, rounded up to whole microseconds,
-- so that the cells are never closer than the rate says.
local function cell_interval(rate, period)
  return div_ceil(period, rate)
end

-- The grants of a window within it at `now` (those made after now - window).
local function in_window(log, now, window)
  return redis.call('zcount', log, '(' .. digits(now - window), '+inf')
end

-- When the grant numbered `index` (from 1) of those within the window at `now` was made.
local function window_grant(log, now, window, index)
  local found = redis.call('zrangebyscore', log, '(' .. digits(now - window), '+inf',
    'withscores', 'limit', index - 1, 1)
  return tonumber(found[2])
end
