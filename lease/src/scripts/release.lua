-- Release one hold of a lock. Applying the same release id twice changes nothing, so a release
-- retried after a lost reply never decrements twice.
-- KEYS[1]  the lock hash (owner -> hold count)
-- KEYS[2]  the release log: a hash, owner -> id of its last applied release (TTL 60 s)
-- ARGV[1]  owner id
-- ARGV[2]  release id: unique per release, the same on a retry
-- ARGV[3]  lease in milliseconds, restored when holds remain
-- ARGV[4]  the channel on which a freed lock is announced
-- Reply    n >= 0  holds left; 0 means the lock was deleted and the release announced
--          -1      the lock is not held by this owner
--          -2      this release was applied already
if redis.call('hget', KEYS[2], ARGV[1]) == ARGV[2] then
  return -2
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('pexpire', KEYS[2], 60000)
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
  return count
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[4], 'freed')
return 0
