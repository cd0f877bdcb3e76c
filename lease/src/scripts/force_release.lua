-- Delete a lock whoever holds it, and announce it.
-- KEYS[1]  the lock hash
-- ARGV[1]  the channel on which a freed lock is announced
-- Reply    1 if a lock was deleted, 0 if there was none
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', ARGV[1], 'freed')
  return 1
end
return 0
