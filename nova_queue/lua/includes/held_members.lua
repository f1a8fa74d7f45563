--[[ held_members: a held set's members, at most MAX_HELD_VISIT of them (a worker holds at
  most a few; the set is writable, so its size is not trusted).
]]
--- @include "common"
local function held_members(held_key)
  if redis.call('SCARD', held_key) <= MAX_HELD_VISIT then
    return redis.call('SMEMBERS', held_key)
  end
  return redis.call('SRANDMEMBER', held_key, MAX_HELD_VISIT)
end
