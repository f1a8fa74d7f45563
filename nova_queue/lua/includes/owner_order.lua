--[[ owner_order: owners (of jobs with pending work) in fair-share order: the lowest recent
  usage relative to their share first. Usage is worker-seconds (note_usage), decayed by
  half every `half_life_s` (the usage hash's field; 3600 when unset); a share is the
  owners hash's weight (1 when unset, at least 0.001). Ties go by name.
]]
--- @include "common"
local function owner_order(prefix, owners, now)
  local fields, shares = { 'half_life_s' }, {}
  for i, o in ipairs(owners) do
    fields[2 * i], fields[2 * i + 1] = 'u:' .. o, 'm:' .. o
  end
  local u = redis.call('HMGET', prefix .. 'usage', unpack(fields))
  local w = redis.call('HMGET', prefix .. 'shares', unpack(owners))
  local half_ms = (num_in(u[1], 1, 1e9) or 3600) * 1000
  local rank = {}
  for i, o in ipairs(owners) do
    local used = num_in(u[2 * i], 0, 1e15) or 0
    local since = math.max(now - (num_in(u[2 * i + 1], 0, 1e15) or now), 0)
    shares[o] = num_in(w[i], 0.001, 1e6) or 1
    rank[o] = used * 2 ^ (-since / half_ms) / shares[o]
  end
  table.sort(owners, function(x, y)
    if rank[x] ~= rank[y] then
      return rank[x] < rank[y]
    end
    return x < y
  end)
  return owners
end
