-- Checks that every script runs before its first write: Redis does not roll a script back, so a
-- script that finds a key or an argument it cannot use must fail before it has changed anything.
-- The checks ride on the reads the scripts make anyway (under redis.pcall, which hands back a
-- refusal instead of raising it). This file is prepended to the scripts; it defines functions.

-- Whether a redis.pcall reply is a refusal for a key of another type.
local function is_wrong_type(reply)
  return type(reply) == 'table' and reply.err ~= nil and string.find(reply.err, 'WRONGTYPE') ~= nil
end

-- The error reply for `key` holding another type than `expected`.
local function wrong_type(key, expected)
  return redis.error_reply('WRONGTYPE key ' .. key .. ' holds another type than a ' .. expected)
end

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

-- Takes the next fencing token from the checked counter `key`, whose value is `last`.
local function next_token(key, last)
  redis.call('incr', key)
  return increment(last)
end
