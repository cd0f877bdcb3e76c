-- Renew many leases in one call: each is extended only if its hold still holds the lock, so a
-- renewal can never create, resurrect or take over a lock, nor extend a later hold of the same
-- owner. A lease is only ever lengthened, never cut short. A key of another type counts as not
-- held; it does not fail the call.
-- KEYS[i]      the lock hash of lease i (see acquire.lua)
-- ARGV[2i-1]   the id of lease i's hold
-- ARGV[2i]     lease i in milliseconds
-- Reply        {r1, r2, ...}: ri = 1 if lease i's hold holds the lock and has at least lease i
--              left (extended to it if it had less), 0 if its hold no longer holds the
--              lock (expired, released, deleted, taken over, or the key is not a lock at all)
-- Errors       ERR (invalid lease), NOPERM (the user may not run PTTL or PEXPIRE on the first
--              lease's key): before any write. The user's rules are asked of the first key only
--              (a client's keys share its key prefix); a key refused alone fails the call after
--              the leases before it were extended, which only does what was asked.
for i = 1, #KEYS do
  local err = bad_lease(ARGV[2 * i])
  if err then
    return err
  end
end
if #KEYS > 0 then
  local refused = denied('pttl', KEYS[1]) or denied('pexpire', KEYS[1], ARGV[2])
  if refused then
    return refused
  end
end
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('hget', key, ':hold') == ARGV[2 * i - 1] then
    -- Never shortens: a re-entry of the hold may have taken a longer lease, and its holder
    -- counts on it.
    if redis.call('pttl', key) < tonumber(ARGV[2 * i]) then
      redis.call('pexpire', key, ARGV[2 * i])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
