-- Resize a semaphore: its number of permits becomes ARGV[1], which every later acquisition must
-- declare while any hold stands (see shared.lua). Holds in excess of a lower number keep their
-- permits until they end; nobody new gets in until fewer than the new number are held.
-- KEYS[1]  the set of holds (see shared.lua)
-- ARGV[1]  the new number of permits (from 1)
-- Reply    the number the holders had declared, or -1 if none had
-- Errors   WRONGTYPE (a set that is another primitive's), NOPERM: before any write
local permits = tonumber(ARGV[1])
if not permits or permits < 1 or permits ~= math.floor(permits) then
  return redis.error_reply('ERR invalid permits: a whole number from 1 expected')
end
local declared = redis.pcall('zscore', KEYS[1], ':semaphore')
if is_wrong_type(declared) then
  return wrong_type(KEYS[1], 'semaphore (a sorted set)')
end
if type(declared) == 'table' and declared.err then
  return declared
end
if not declared then
  local other = redis.call('zrange', KEYS[1], 0, 0)
  if #other > 0 then
    return wrong_type(KEYS[1], 'semaphore (a sorted set)')
  end
end
local refused = denied('zadd', KEYS[1], permits, ':semaphore')
if refused then
  return refused
end
redis.call('zadd', KEYS[1], permits, ':semaphore')
return declared and tonumber(declared) or -1
