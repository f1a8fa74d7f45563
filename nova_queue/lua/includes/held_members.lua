--[[ held_members: a held set's members, at most MAX_HELD_VISIT of them (a worker holds at
  most a few; the set is writable, so its size is not trusted).
]]
--- @include "members_upto"
local function held_members(held_key)
  return members_upto(held_key, MAX_HELD_VISIT)
end
