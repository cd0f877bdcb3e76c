-- Release one acquisition of a hold of a semaphore or read-write lock (see shared.lua); at the
-- hold's last, delete it, drop it from the set of holds and announce that something was freed.
-- Applying a release twice changes nothing.
-- KEYS[1]  the set of holds
-- KEYS[2]  the hold's key
-- KEYS[3]  the hold's release log: the id of the acquisition whose release ended it, for 60 s,
--          so that a retried release that ended it is told it was applied
-- ARGV[1]  owner id
-- ARGV[2]  the hold's id
-- ARGV[3]  the acquisition's id
-- ARGV[4]  the channel on which a release is announced
-- ARGV[5]  'publish', or 'spublish' for a sharded channel (Redis Cluster)
-- Reply    {n} released, n >= 1 acquisitions of the hold left; {0} the hold ended (and was
--          announced); {-1} this hold holds nothing; {-2} this release was applied already
-- Errors   WRONGTYPE, BADVALUE, NOPERM: before any write
local now = release_one(KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if now then
  return now
end
local refused = denied('del', KEYS[2]) or denied('zrem', KEYS[1], ARGV[2])
  or denied('set', KEYS[3], ARGV[3], 'px', '60000')
if refused then
  return refused
end
-- The first write, which a set of another type refuses with nothing written.
local dropped = redis.pcall('zrem', KEYS[1], ARGV[2])
if is_wrong_type(dropped) then
  return wrong_type(KEYS[1], 'semaphore or read-write lock (a sorted set)')
end
redis.call('del', KEYS[2])
redis.call('set', KEYS[3], ARGV[3], 'px', 60000)
if redis.acl_check_cmd(ARGV[5], ARGV[4], 'freed') then
  redis.call(ARGV[5], ARGV[4], 'freed')
end
return {0}
