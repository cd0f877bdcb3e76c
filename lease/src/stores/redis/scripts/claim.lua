-- Claim a grant whose reply was lost, for the waiting owner it was made to. Its releaser wrote,
-- behind the release, the withdrawal of the grant: a release of the granted hold's first
-- acquisition, whose id is the hold's. A claim renames that acquisition to the claimant's, so
-- that the withdrawal, whichever of the two Redis runs first, applies only to a grant nobody
-- claimed. Applying a claim twice changes nothing.
-- KEYS[1]  the lock hash (see acquire.lua)
-- ARGV[1]  the owner id the lock was granted to
-- ARGV[2]  the granted hold's id (its first acquisition's)
-- ARGV[3]  the claimant's acquisition id
-- Reply    the hold's fencing token (a decimal string) if the grant stands and is claimed
--          nil                 no grant to claim: withdrawn, never made, or lapsed
-- Errors   WRONGTYPE, NOPERM (the user may not run a command the claim needs): before any write
local granted = ':a:' .. ARGV[2]
local claimed = ':a:' .. ARGV[3]
local state, unreadable = lock_fields(KEYS[1], ':hold', ARGV[1], granted, claimed, ':token')
if unreadable then
  return unreadable
end
if state[1] ~= ARGV[2] or not state[2] or not state[5] then
  return false
end
if state[4] then
  return state[5]
end
if not state[3] then
  return false
end
local refused = denied('hdel', KEYS[1], granted) or denied('hset', KEYS[1], claimed, '1')
if refused then
  return refused
end
redis.call('hdel', KEYS[1], granted)
redis.call('hset', KEYS[1], claimed, 1)
return state[5]
