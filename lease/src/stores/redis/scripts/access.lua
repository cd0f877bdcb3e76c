-- What every script that writes asks before its first write, and how it names a key of another
-- type: Redis does not roll a script back, so a script that finds a key it cannot use, or a
-- command its user may not run, must fail before it has changed anything. This file is
-- prepended to every script but the common lock and unlock (which carry their own); it defines
-- functions.

-- An error reply (NOPERM) if this script's user may not run `command` with `key` and `...` as its
-- arguments (ACL rules: the command, its key, its channel), else nil. Redis does not roll a script
-- back and the user's rules apply inside it, so a command refused half-way would leave the writes
-- before it: a script asks this of every command it may still call, before its first write.
local function denied(command, key, ...)
  if redis.acl_check_cmd(command, key, ...) then
    return nil
  end
  return redis.error_reply('NOPERM this user may not run ' .. command .. ' on ' .. key ..
    ', which the lock needs; nothing was written')
end

-- Whether a redis.pcall reply is a refusal for a key of another type.
local function is_wrong_type(reply)
  return type(reply) == 'table' and reply.err ~= nil and string.find(reply.err, 'WRONGTYPE') ~= nil
end

-- The error reply for `key` holding another type than `expected`.
local function wrong_type(key, expected)
  return redis.error_reply('WRONGTYPE key ' .. key .. ' holds another type than a ' .. expected)
end
