--[[ owner_order: fair-share ranks of owners (of jobs with pending work): rank[i] is
  log2(usage / share) of owners[i] but for a term common to all (note_usage: the field F =
  f:<owner> of the usage hash less log2 of the owner's share; -inf for an owner with no
  usage), so the lowest rank is served first, ties by name (next_owner). One HMGET of the
  owners' fields, the shares hash only when some share is set (1 when unset, at least 0.001).
  A field beyond the 1e15-second cap (written by hand) counts as the cap. What it read of the
  usage hash stays in s.usage (half_life_s, phase, and f: owner -> its field) for note_usage.
]]
--- @include "usage_phase"
local function owner_order(prefix, owners, now, s)
  local fields = {}
  for i, o in ipairs(owners) do
    fields[i] = 'f:' .. o
  end
  local n = #owners -- the owners' fields, then the two the decay takes
  fields[n + 1], fields[n + 2] = 'half_life_s', 'phase'
  local u = redis.call('HMGET', prefix .. 'usage', unpack(fields))
  s.usage = { half_life_s = u[n + 1], phase = u[n + 2], f = {} }
  local top = usage_phase(s.usage.half_life_s, s.usage.phase, now) + LOG2_MAX_USAGE
  local w = redis.call('HLEN', prefix .. 'shares') > 0
    and redis.call('HMGET', prefix .. 'shares', unpack(owners))
  local rank = {}
  for i = 1, n do
    s.usage.f[owners[i]] = u[i]
    rank[i] = math.min(num_in(u[i], -math.huge, math.huge) or -math.huge, top)
    if w then
      rank[i] = rank[i] - math.log(num_in(w[i], 0.001, 1e6) or 1) / LN2
    end
  end
  return rank
end
