-- What a count-down latch's scripts share (prepended to them, after checks.lua and holds.lua;
-- it defines functions).

-- The latch `key`'s count and round ({count, round}, each nil if absent); or nil and an error
-- reply if it cannot be read: a key of another type, or a count that is not a whole number.
local function latch_fields(key)
  local fields = redis.pcall('hmget', key, 'count', 'round')
  if is_wrong_type(fields) then
    return nil, wrong_type(key, 'latch (a hash)')
  end
  if fields.err then
    return nil, fields
  end
  if fields[1] and (not string.match(fields[1], '^%d+$') or #fields[1] > 10) then
    return nil, redis.error_reply('BADVALUE ' .. key .. ' holds a count that is not a whole number')
  end
  return fields, nil
end
