-- An election's leader proclaims a value: stored in its hold, for observers to read, and
-- announced on the election's channel to wake them. Only while the hold still holds.
-- KEYS[1]  the election's lock hash (see acquire.lua)
-- ARGV[1]  the leader's owner id
-- ARGV[2]  its hold's id
-- ARGV[3]  the value
-- ARGV[4]  the election's channel
-- ARGV[5]  how it is announced: 'publish', or 'spublish' for a sharded channel
-- Reply    1  proclaimed
--          0  the hold does not hold the election (its term is over)
-- Errors   WRONGTYPE, NOPERM (the user may not store the value): before any write
local state, unreadable = lock_fields(KEYS[1], ':hold', ARGV[1])
if unreadable then
  return unreadable
end
if state[1] ~= ARGV[2] or not state[2] then
  return 0
end
local refused = denied('hset', KEYS[1], ':value', ARGV[3])
if refused then
  return refused
end
redis.call('hset', KEYS[1], ':value', ARGV[3])
-- Observers that may not be told look again by themselves.
local announce = ARGV[5] == 'spublish' and 'spublish' or 'publish'
if redis.acl_check_cmd(announce, ARGV[4], 'proclaimed') then
  redis.call(announce, ARGV[4], 'proclaimed')
end
return 1
