-- Acquire a plain lock as a new hold, or find it held: the common acquisition, as one server
-- runs it without epochs (no re-entry named, no fair line, no tokens reserved; those go through
-- acquire.lua, which this script must agree with). It carries only its own logic, with no shared
-- functions: the server runs all of a script's text at every call. The lock's layout is
-- acquire.lua's.
-- KEYS[1]  the lock hash (see acquire.lua)
-- KEYS[2]  the fencing counter: the last token handed out (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  this acquisition's id, unique; also the hold's id
-- Reply    {1, 1, token}   acquired as a new hold with the next fencing token
--          {0, ttl}        held (-1: without expiry), maybe by an earlier hold of the same owner
-- Errors   WRONGTYPE, BADVALUE, ERR (invalid lease), NOPERM (the user may not run a command the
--          acquisition needs): before any write, as acquire.lua words them (a counter found below
--          0 is put back as it was)
local lease = ARGV[1]
if #lease > 12 or not string.find(lease, '^[1-9]%d*$') then
  return redis.error_reply('ERR invalid lease: a whole number of milliseconds is expected')
end
if redis.call('exists', KEYS[1]) == 1 then
  local held = redis.pcall('hget', KEYS[1], ':hold')
  if type(held) == 'table' then
    if string.find(held.err, 'WRONGTYPE') then
      return redis.error_reply('WRONGTYPE key ' .. KEYS[1] ..
        ' holds another type than a lock (a hash)')
    end
    return held
  end
  return {0, redis.call('pttl', KEYS[1])}
end
-- Redis does not roll a script back: the commands after the first write are checked against
-- the user's rules before it, and the first write, INCR of the counter, is made under
-- redis.pcall, so that whatever refuses it (the rules, OOM, a replica's READONLY) has written
-- nothing.
local refused = (not redis.acl_check_cmd('hset', KEYS[1]) and 'hset')
  or (not redis.acl_check_cmd('pexpire', KEYS[1]) and 'pexpire')
if refused then
  return redis.error_reply('NOPERM this user may not run ' .. refused .. ' on ' .. KEYS[1] ..
    ', which the lock needs; nothing was written')
end
-- The next token: INCR checks the counter (a whole number, below 2^63 - 1) as it raises it.
local token = redis.pcall('incr', KEYS[2])
local failed = type(token) == 'table' and token.err
if not failed and token < 1 then
  -- The counter was below 0: put back as it was.
  redis.pcall('decr', KEYS[2])
  failed = 'not an integer'
end
if failed then
  if string.find(failed, 'WRONGTYPE') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[2] .. ' holds another type than a counter')
  elseif string.find(failed, 'overflow') then
    return redis.error_reply('BADVALUE ' .. KEYS[2] ..
      ' has reached the largest fencing token (2^63 - 1)')
  elseif string.find(failed, 'not an integer') then
    return redis.error_reply('BADVALUE ' .. KEYS[2] .. ' is not a whole number from 0')
  elseif string.find(failed, 'user executing the script') or string.find(failed, 'ACL') then
    return redis.error_reply('NOPERM this user may not run incr on ' .. KEYS[2] ..
      ', which the lock needs; nothing was written')
  end
  return redis.error_reply(failed)
end
if token >= 9007199254740992 then
  -- A Lua number is a double: past 2^53 the counter's own digits are the token.
  token = redis.call('get', KEYS[2])
end
redis.call('hset', KEYS[1], ARGV[2], 1, ':hold', ARGV[3], ':token', token, ':a:' .. ARGV[3], 1)
redis.call('pexpire', KEYS[1], lease)
return {1, 1, token}
