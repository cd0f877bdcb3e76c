-- Count a count-down latch down once, if it is above zero; at zero, announce it to its waiters.
-- KEYS[1]  the latch (see latch_set.lua)
-- ARGV[1]  the expiry, in milliseconds, from now on while it counts
-- ARGV[2]  how long it is kept once at zero, in milliseconds (the expiry, or more)
-- ARGV[3]  the latch's channel
-- ARGV[4]  how it is announced: 'publish', or 'spublish' for a sharded channel
-- Reply    the count left: 0 once at zero (now, or before), or if the latch is absent
-- Errors   WRONGTYPE, BADVALUE (a count that is not a whole number), ERR (invalid expiry),
--          NOPERM: before any write
local err = bad_lease(ARGV[1]) or bad_lease(ARGV[2])
if err then
  return err
end
local fields, unreadable = latch_fields(KEYS[1])
if unreadable then
  return unreadable
end
if not fields[1] or fields[1] == '0' then
  return 0
end
local refused = denied('hincrby', KEYS[1], 'count', '-1') or denied('pexpire', KEYS[1], ARGV[1])
if refused then
  return refused
end
local left = redis.call('hincrby', KEYS[1], 'count', -1)
if left > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return left
end
redis.call('pexpire', KEYS[1], ARGV[2])
-- Waiters that may not be told look again by themselves.
local announce = ARGV[4] == 'spublish' and 'spublish' or 'publish'
if redis.acl_check_cmd(announce, ARGV[3], 'opened') then
  redis.call(announce, ARGV[3], 'opened')
end
return 0
