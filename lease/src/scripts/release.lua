-- Release one hold of a lock; at the last hold, either free it (and announce it) or grant it
-- straight to a waiting owner of the same client. Applying the same release id twice changes
-- nothing, so a release retried after a lost reply never takes two holds away.
-- KEYS[1]  the lock hash (owner -> hold count)
-- KEYS[2]  the release log: a hash, owner -> id of its last applied release (TTL 60 s)
-- KEYS[3]  the fencing counter
-- ARGV[1]  owner id
-- ARGV[2]  release id: unique per release, the same on a retry
-- ARGV[3]  lease in milliseconds, restored when holds remain
-- ARGV[4]  the channel on which a freed lock is announced
-- ARGV[5]  owner id to grant the lock to at the last hold, or '' to free it
-- ARGV[6]  the lease of that grant, in milliseconds
-- Reply    {n}         n >= 1 holds left
--          {0}         the lock was freed and announced
--          {0, token, subscribers}
--                      the lock was granted to ARGV[5] with this fencing token; subscribers
--                      is how many connections watch the lock's channel (waiters of every
--                      client, the granting client's own included)
--          {-1}        the lock is not held by this owner
--          {-2}        this release was applied already
if redis.call('hget', KEYS[2], ARGV[1]) == ARGV[2] then
  return {-2}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return {-1}
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('pexpire', KEYS[2], 60000)
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[3])
  return {count}
end
redis.call('del', KEYS[1])
if ARGV[5] ~= '' then
  redis.call('hset', KEYS[1], ARGV[5], 1)
  redis.call('pexpire', KEYS[1], ARGV[6])
  local subscribers = redis.call('pubsub', 'numsub', ARGV[4])[2]
  return {0, redis.call('incr', KEYS[3]), subscribers}
end
redis.call('publish', ARGV[4], 'freed')
return {0}
