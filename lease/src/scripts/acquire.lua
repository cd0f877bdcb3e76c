-- Acquire a lock, or re-enter it for the same owner.
-- KEYS[1]  the lock: a hash, owner -> hold count, whose TTL is the lease
-- KEYS[2]  the fencing counter: the last token handed out (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- Reply    {1, hold count, fencing token}   acquired (count 1) or re-entered (count > 1);
--                                           a fresh acquisition takes the next token,
--                                           a re-entry returns the current one
--          {0, remaining TTL in ms}          held by another owner (-1: no TTL)
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, count, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
