-- Withdraw a waiter that stopped waiting: its place in a fair lock's queue, and its mark as the
-- writer that waits on a read-write lock (if the mark is still its own), so that those behind
-- it need not wait for either to lapse.
-- KEYS[1]  a fair lock's queue (see acquire.lua)
-- KEYS[2]  the lapse times of the queue's places
-- KEYS[3]  the waiting writer (see shared.lua)
-- ARGV[1]  owner id
-- Reply    1
-- Errors   WRONGTYPE, NOPERM: before any write
local writer = redis.pcall('get', KEYS[3])
if is_wrong_type(writer) then
  return wrong_type(KEYS[3], 'waiting writer (a string)')
end
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local place = redis.pcall('zscore', key, ARGV[1])
  if is_wrong_type(place) then
    return wrong_type(key, 'queue (a sorted set)')
  end
end
local refused = denied('zrem', KEYS[1], ARGV[1]) or denied('zrem', KEYS[2], ARGV[1])
  or (writer == ARGV[1] and denied('del', KEYS[3]))
if refused then
  return refused
end
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
if writer == ARGV[1] then
  redis.call('del', KEYS[3])
end
return 1
