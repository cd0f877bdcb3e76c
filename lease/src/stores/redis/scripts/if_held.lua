-- A write of the caller's own, made only while a hold still holds its lock: the check and the
-- write run in this one script, so no other command runs between them. The write's body takes
-- the place of the marked line below, inside a function whose KEYS and ARGV are its own.
-- KEYS[1]      the hold's key (a lock's hash, or a hold of a semaphore or a read-write lock:
--              see holds.lua)
-- KEYS[2..]    the write's keys: its KEYS[1], KEYS[2], ...
-- ARGV[1]      the hold's owner id
-- ARGV[2]      the hold's id
-- ARGV[3..]    the write's arguments: its ARGV[1], ARGV[2], ...
-- Reply        {1, reply}  written, `reply` the write's own
--              {0}         the hold no longer holds: nothing of the write ran
-- Errors       WRONGTYPE (the hold's key is not a lock's), before the write; the write's own
local held = redis.pcall('hmget', KEYS[1], ':hold', ARGV[1])
if type(held) == 'table' and held.err then
  if string.find(held.err, 'WRONGTYPE') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds another type than a lock (a hash)')
  end
  return held
end
if held[1] ~= ARGV[2] or not held[2] then
  return {0}
end
local keys, args = {}, {}
for i = 2, #KEYS do
  keys[i - 1] = KEYS[i]
end
for i = 3, #ARGV do
  args[i - 2] = ARGV[i]
end
local reply = (function(KEYS, ARGV)
-- @write@
end)(keys, args)
if type(reply) == 'table' and reply.err then
  return reply
end
return {1, reply}
