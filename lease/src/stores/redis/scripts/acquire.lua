-- Acquire a lock as a new hold, or re-enter the hold the caller says it has.
-- The lock is a hash: the owner id -> its hold count (as Redisson keeps it), and fields that
-- start with ':' (owner ids never do): ':hold' -> the hold's id, ':token' -> its fencing token,
-- ':a:<id>' -> 1 for each acquisition of the hold not yet released. Its TTL is the lease.
-- KEYS[1]  the lock hash
-- KEYS[2]  the fencing counter: the last token handed out (never expires)
-- KEYS[3]  the epoch note: a cluster node's configuration epoch beside its replication id (see
--          checks.lua; only with the epoch 'cluster')
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  this acquisition's id, unique; also the hold's id if the lock is free
-- ARGV[4]  the id of the hold the caller holds and may re-enter, or ''
-- KEYS[4]  a fair lock's queue: sorted set of waiting owners by when they first asked
-- KEYS[5]  a fair lock's places: sorted set of waiting owners by when their place lapses (ms on
--          the server's clock), unless they ask again
-- ARGV[5]  the epoch of the tokens: '' (none), a whole number, or 'cluster' (see checks.lua);
--          a new hold's token is one above the counter, or the epoch's first if that is higher
-- ARGV[6]  for a fair lock, how long a waiter's place lasts without it asking again, in ms; ''
--          for a lock that is not fair. A fair acquisition takes a free lock only if no waiter
--          whose place lasts asked before it; a waiting one takes (or keeps) its place in line.
-- ARGV[7]  '1' if the caller waits for the lock, else '0'
-- ARGV[8]  the id of a hold of the caller's client that the caller believes holds the lock, to
--          reserve fencing tokens for, or '' (see reserve in holds.lua)
-- ARGV[9]  how many tokens to reserve: for the hold ARGV[8] if it holds the lock, or past a new
--          hold's own if the lock is free ('0' or absent: none; a plain lock only)
-- ARGV[10] the lock's channel, whose watchers a reservation counts (ARGV[9] given)
-- ARGV[11] 'numsub', or 'shardnumsub' for a sharded channel (Redis Cluster; ARGV[9] given)
-- Reply    {1, 1, token}       acquired as a new hold with the next fencing token
--          {1, 1, token, last, subscribers}
--                              the same, and the tokens after it up to last reserved for it
--                              (ARGV[9]); subscribers connections watch the lock's channel
--          {1, holds, token}   re-entered (holds > 1): the hold keeps its token, and its lease
--                              is extended to ARGV[1] if less than that is left
--          {0, ttl}            held by another hold (-1: without expiry); that may be an earlier
--                              hold of the same owner that the caller does not name
--          {0, ttl, first, last, subscribers}
--                              held by the hold ARGV[8], for which the tokens first..last were
--                              reserved; subscribers connections watch the lock's channel
-- Errors   WRONGTYPE, BADVALUE, ERR (invalid lease or epoch), EPOCH (the counter is past the
--          epoch's tokens), NOPERM (the user may not run a command the acquisition needs):
--          before any write
local err = bad_lease(ARGV[1])
if err then
  return err
end
local last, bad = fence_value(KEYS[2])
if bad then
  return bad
end
local line = ARGV[6] ~= '' and fair_line(KEYS[4], KEYS[5], ARGV[2], ARGV[6], ARGV[7] == '1')
if line and line.bad then
  return line.bad
end
if redis.call('exists', KEYS[1]) == 0 then
  if line and line.behind then
    return line.wait()
  end
  local token, behind, note, ceiling = token_after(last, ARGV[5], KEYS[3])
  if behind then
    return behind
  end
  local refused = new_hold_denied(KEYS[1], KEYS[2], KEYS[3], note, ARGV[2], ARGV[3], token,
    ARGV[1]) or (line and line.denied())
  if refused then
    return refused
  end
  if line then
    line.leave()
  end
  new_hold(KEYS[1], KEYS[2], KEYS[3], note, ARGV[2], ARGV[3], token, ARGV[1])
  local extra = tonumber(ARGV[9] or '0')
  if not line and extra and extra >= 1 and redis.acl_check_cmd('pubsub', ARGV[11], ARGV[10]) then
    local top = reserve_after(KEYS[2], token, ceiling, extra)
    if top then
      return {1, 1, token, top, redis.call('pubsub', ARGV[11], ARGV[10])[2]}
    end
  end
  return {1, 1, token}
end
local held, unreadable = lock_fields(KEYS[1], ':hold', ARGV[2], ':token')
if unreadable then
  return unreadable
end
local again = reenter(KEYS[1], held, ARGV[2], ARGV[4], ARGV[3], ARGV[1], last)
if again then
  return again
end
local ttl = redis.call('pttl', KEYS[1])
if line then
  return line.wait(ttl)
end
if ARGV[8] and ARGV[8] ~= '' and held[1] == ARGV[8] then
  return reserve(KEYS[2], KEYS[3], last, ARGV[5], tonumber(ARGV[9]), ttl, ARGV[10], ARGV[11])
end
return {0, ttl}
