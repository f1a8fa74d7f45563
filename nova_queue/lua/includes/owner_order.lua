--[[ owner_order: fair-share ranks of owners (of jobs with pending work): rank[i] is
  log2(usage / share) of owners[i] but for a term common to all (note_usage: the field F =
  f:<owner> of the usage hash less log2 of the owner's share; -inf for an owner with no
  usage), so the lowest rank is served first, ties by name (next_owner). One HMGET of the
  owners' fields, the shares hash only when some share is set (1 when unset, at least 0.001).
  A field beyond the 1e15-second cap (written by hand) counts as the cap. What it read of the
  usage hash stays in s.usage (owner -> {f:<owner>, half_life_s, phase}) for note_usage.
]]
--- @include "usage_phase"
local function owner_order(prefix, owners, now, s)
  local fields = { 'half_life_s', 'phase' }
  for i, o in ipairs(owners) do
    fields[i + 2] = 'f:' .. o
  end
  local u = redis.call('HMGET', prefix .. 'usage', unpack(fields))
  local top = usage_phase(u[1], u[2], now) + LOG2_MAX_USAGE
  local w = redis.call('HLEN', prefix .. 'shares') > 0
    and redis.call('HMGET', prefix .. 'shares', unpack(owners))
  local rank = {}
  s.usage = {}
  for i = 1, #owners do
    s.usage[owners[i]] = { u[i + 2], u[1], u[2] }
    rank[i] = math.min(num_in(u[i + 2], -math.huge, math.huge) or -math.huge, top)
    if w then
      rank[i] = rank[i] - math.log(num_in(w[i], 0.001, 1e6) or 1) / LN2
    end
  end
  return rank
end

