--[[ members_upto: at most n distinct members of set `key` (all of them when it has no more),
  without a command whose cost its caller picks (SRANDMEMBER with a negative count costs
  what its argument says, whatever the set holds: the worker role may not run it). SSCAN
  from the start, at most 4 calls of COUNT n: a small set (listpack or intset encoded)
  answers whole in one.
]]
--- @include "common"
local function members_upto(key, n)
  local out, seen, cursor = {}, {}, '0'
  for _ = 1, 4 do
    local next_cursor, members = unpack(redis.call('SSCAN', key, cursor, 'COUNT', n))
    cursor = next_cursor
    for _, m in ipairs(members) do
      if #out >= n then
        return out
      end
      if not seen[m] then
        seen[m] = true
        out[#out + 1] = m
      end
    end
    if cursor == '0' then
      break
    end
  end
  return out
end
