-- A fenced resource: accept a write only if its token is at least the highest accepted so far,
-- and log every write in arrival order.
-- KEYS[1]  the resource: a hash, 'max' -> highest accepted token
-- KEYS[2]  the write log: a list of "a <token> <client>" (accepted) or "r <token> <client>"
-- ARGV[1]  the writer's fencing token
-- ARGV[2]  the writer's client name
-- Reply    1 accepted, 0 rejected
local max = tonumber(redis.call('hget', KEYS[1], 'max') or '0')
local token = tonumber(ARGV[1])
if token >= max then
  redis.call('hset', KEYS[1], 'max', token)
  redis.call('rpush', KEYS[2], 'a ' .. ARGV[1] .. ' ' .. ARGV[2])
  return 1
end
redis.call('rpush', KEYS[2], 'r ' .. ARGV[1] .. ' ' .. ARGV[2])
return 0
