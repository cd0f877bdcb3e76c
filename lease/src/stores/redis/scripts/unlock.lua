-- Release one acquisition of a hold of a plain lock; at the hold's last, free the lock and
-- announce it: the common release, without a grant (a release that may grant the lock goes
-- through release.lua, whose replies and checks this script shares). It carries only its own
-- logic, with no shared functions: the server runs all of a script's text at every call. A
-- release names its hold and its acquisition, so it never touches a later hold of the same
-- owner, and applying it twice changes nothing.
-- KEYS[1]  the lock hash (see acquire.lua)
-- KEYS[2]  the release log (see release.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the hold's id
-- ARGV[3]  the acquisition's id
-- ARGV[4]  the channel on which a freed lock is announced
-- ARGV[5]  how it is announced: 'publish', or 'spublish' for a sharded channel (Redis Cluster)
-- Reply    {n}   released; n >= 1 acquisitions of the hold are left
--          {0}   the lock was freed and announced (not announced if the user may not publish:
--                waiters find it free when they look again)
--          {-1}  this hold does not hold the lock
--          {-2}  this release was applied already
-- Errors   WRONGTYPE, BADVALUE (a hold count that is not a number), NOPERM (the user may not run
--          a command the release needs): before any write
local owner, hold, id = ARGV[1], ARGV[2], ARGV[3]
local acquisition = ':a:' .. id
local state = redis.pcall('hmget', KEYS[1], ':hold', owner, acquisition)
if state.err then
  if string.find(state.err, 'WRONGTYPE') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] ..
      ' holds another type than a lock (a hash)')
  end
  return state
end
if state[1] ~= hold or not state[2] then
  if redis.pcall('get', KEYS[2]) == id then
    return {-2}
  end
  return {-1}
end
if not state[3] then
  return {-2}
end
local left = tonumber(state[2])
if not left then
  return redis.error_reply('BADVALUE ' .. KEYS[1] .. ' has a hold count that is not a number')
end
-- Redis does not roll a script back: the commands after the first write are checked against
-- the user's rules before it, and the first write is made under redis.pcall, so that whatever
-- refuses it (the rules, OOM, a replica's READONLY) has written nothing.
local first, refused, written
if left > 1 then
  first = 'hincrby'
  refused = not redis.acl_check_cmd('hdel', KEYS[1]) and 'hdel on ' .. KEYS[1]
  written = not refused and redis.pcall('hincrby', KEYS[1], owner, -1)
else
  first = 'del'
  refused = not redis.acl_check_cmd('set', KEYS[2]) and 'set on ' .. KEYS[2]
  written = not refused and redis.pcall('del', KEYS[1])
end
if type(written) == 'table' and written.err then
  if not (string.find(written.err, 'user executing the script') or
      string.find(written.err, 'ACL')) then
    return written
  end
  refused = first .. ' on ' .. KEYS[1]
end
if refused then
  return redis.error_reply('NOPERM this user may not run ' .. refused ..
    ', which the lock needs; nothing was written')
end
if left > 1 then
  redis.call('hdel', KEYS[1], acquisition)
  return {left - 1}
end
redis.call('set', KEYS[2], id, 'px', 60000)
local announce = ARGV[5] == 'spublish' and 'spublish' or 'publish'
if redis.acl_check_cmd(announce, ARGV[4]) then
  redis.call(announce, ARGV[4], 'freed')
end
return {0}
