-- Set a count-down latch's count, only while it is at zero or absent: a new round begins.
-- KEYS[1]  the latch: a hash, 'count' -> its count (a whole number from 0), 'round' -> the id of
--          the round the count belongs to; its TTL the latch's expiry
-- ARGV[1]  the count (from 1)
-- ARGV[2]  the new round's id
-- ARGV[3]  the expiry, in milliseconds
-- Reply    1  set
--          0  not set: the latch counts down a round above zero
-- Errors   WRONGTYPE, BADVALUE (a count that is not a whole number), ERR (invalid count or
--          expiry), NOPERM: before any write
local err = bad_lease(ARGV[3])
if err then
  return err
end
if not string.match(ARGV[1], '^[1-9]%d*$') or #ARGV[1] > 10 then
  return redis.error_reply('ERR invalid count: a whole number from 1 is expected')
end
local fields, unreadable = latch_fields(KEYS[1])
if unreadable then
  return unreadable
end
if fields[1] and fields[1] ~= '0' then
  return 0
end
local refused = denied('hset', KEYS[1], 'count', ARGV[1], 'round', ARGV[2])
  or denied('pexpire', KEYS[1], ARGV[3])
if refused then
  return refused
end
redis.call('hset', KEYS[1], 'count', ARGV[1], 'round', ARGV[2])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
