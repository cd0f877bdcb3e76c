-- Renew many leases in one call: each lease is extended only if its owner still holds it, so a
-- renewal can never create, resurrect or take over a lock.
-- KEYS[i]      the lock hash of lease i (owner -> hold count)
-- ARGV[2i-1]   owner id of lease i
-- ARGV[2i]     lease i in milliseconds
-- Reply        {r1, r2, ...}: ri = 1 if lease i was extended, 0 if its owner no longer holds it
--              (expired, released, deleted, taken over, or the key is not a lock at all)
local renewed = {}
for i, key in ipairs(KEYS) do
  local held = redis.pcall('hexists', key, ARGV[2 * i - 1])
  if held == 1 then
    redis.call('pexpire', key, ARGV[2 * i])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
