-- Release one acquisition of a hold; at the hold's last, free the lock (and announce it) or
-- grant it to a waiting owner of the same client. A release names its hold and its acquisition,
-- so it never touches a later hold of the same owner, and applying it twice changes nothing.
-- KEYS[1]  the lock hash (see acquire.lua)
-- KEYS[2]  the fencing counter
-- KEYS[3]  the release log: the id of the acquisition whose release last freed or granted the
--          lock, for 60 s, so that a retried release that freed it is told it was applied
-- KEYS[4]  the epoch note (see acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the hold's id
-- ARGV[3]  the acquisition's id
-- ARGV[4]  the channel on which a freed lock is announced
-- ARGV[5]  owner id to grant the lock to at the last acquisition, or '' to free it
-- ARGV[6]  the id of the granted hold (its first acquisition)
-- ARGV[7]  the lease of the grant in milliseconds ('1' when not granting)
-- ARGV[8]  how the lock's channel is announced: 'publish', or 'spublish' for a sharded channel
--          (Redis Cluster)
-- ARGV[9]  the epoch of a granted hold's token (see acquire.lua)
-- ARGV[10] how many tokens to reserve past a granted hold's own, for its client to hand on
--          without the server ('0' or absent: none)
-- Reply    {n}                     released; n >= 1 acquisitions of the hold are left
--          {0}                     the lock was freed and announced (not announced if the user
--                                  may not publish: waiters find it free when they look again)
--          {0, token, subscribers} the lock was granted to ARGV[5] with this fencing token;
--                                  subscribers is how many connections watch the lock's
--                                  channel (waiters of every client, the granting one's too)
--          {0, token, subscribers, last}
--                                  the same, and the tokens after it up to last reserved for
--                                  the granted hold (ARGV[10])
--          {-1}                    this hold does not hold the lock
--          {-2}                    this release was applied already
-- Errors   WRONGTYPE, BADVALUE (a hold count that is not a number), ERR (invalid lease), NOPERM
--          (the user may not run a command the release needs): before any write. A grant the
--          user may not make (a command it needs refused) frees the lock instead.
local err = bad_lease(ARGV[7])
if err then
  return err
end
local now = release_one(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if now then
  return now
end
local refused = denied('del', KEYS[1]) or denied('set', KEYS[3], ARGV[3], 'px', '60000')
if refused then
  return refused
end
-- A grant needs a token, and the user's leave to write it; if the counter cannot give one or a
-- command is refused, the lock is freed instead, and the waiter, trying by itself, is told what
-- is wrong with the counter, the epoch or its rights.
local token, note, ceiling
local count = ARGV[8] == 'spublish' and 'shardnumsub' or 'numsub'
if ARGV[5] ~= '' then
  local last = fence_value(KEYS[2])
  if last then
    local _
    token, _, note, ceiling = token_after(last, ARGV[9], KEYS[4])
  end
  if token and (new_hold_denied(KEYS[1], KEYS[2], KEYS[4], note, ARGV[5], ARGV[6], token, ARGV[7])
      or not redis.acl_check_cmd('pubsub', count, ARGV[4])) then
    token = nil
  end
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[3], ARGV[3], 'px', 60000)
if token then
  new_hold(KEYS[1], KEYS[2], KEYS[4], note, ARGV[5], ARGV[6], token, ARGV[7])
  local subscribers = redis.call('pubsub', count, ARGV[4])[2]
  local top = reserve_after(KEYS[2], token, ceiling, ARGV[10])
  if top then
    return {0, token, subscribers, top}
  end
  return {0, token, subscribers}
end
local announce = ARGV[8] == 'spublish' and 'spublish' or 'publish'
if redis.acl_check_cmd(announce, ARGV[4], 'freed') then
  redis.call(announce, ARGV[4], 'freed')
end
return {0}
