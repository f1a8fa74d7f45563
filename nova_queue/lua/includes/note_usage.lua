--[[ note_usage: worker-seconds count toward an owner's recent usage, which fair share weighs
  (owner_order). Usage halves every half-life, kept as forward decay in the log domain, so
  nothing is ever rescaled and one field per owner holds it: f:<owner> of the usage hash is
  F = log2(sum_i c_i 2^phi(t_i)) over the owner's charges c_i (seconds) at times t_i
  (usage_phase), and its usage now is 2^(F - phi(now)); a missing field is usage 0. A charge
  c > 0 makes F = log2(2^F + c 2^phi(now)); a negative one (a commit's settlement of a run
  shorter than charged) subtracts, and usage stops at 0 (the field goes). A claim under fair
  share charges the predicted time, the commit the rest of the run time. At most 1e15 s.
  `usage`: what this script read of the usage hash already (owner_order's s.usage:
  half_life_s, phase and f, owner -> its field), or nil.
]]
--- @include "usage_phase"
local function note_usage(prefix, owner, run_s, now, usage)
  if run_s == 0 then
    return
  end
  local key, field = prefix .. 'usage', 'f:' .. owner
  local f_field, half_life_s, phase
  if usage and usage.f[owner] ~= nil then
    f_field, half_life_s, phase = usage.f[owner], usage.half_life_s, usage.phase
  else
    f_field, half_life_s, phase = unpack(redis.call('HMGET', key, 'f:' .. owner, 'half_life_s',
      'phase'))
  end
  local phi = usage_phase(half_life_s, phase, now)
  local f = num_in(f_field, -math.huge, math.huge) -- not NaN
  local a = phi + math.log(math.abs(run_s)) / LN2
  if run_s > 0 then
    if f then
      f = math.max(f, a) + math.log(1 + 2 ^ -math.abs(f - a)) / LN2
    else
      f = a
    end
  elseif f and a < f then
    f = f + math.log(1 - 2 ^ (a - f)) / LN2
  else
    redis.call('HDEL', key, field)
    return
  end
  redis.call('HSET', key, field, string.format('%.17g', math.min(f, phi + LOG2_MAX_USAGE)))
end
