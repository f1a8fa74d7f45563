--[[ estimate: the claiming worker's estimate for the app (seconds per cost unit) and
  whether it is a measured one. me: the worker's {ema, n, bench} for the app. Measured:
  its moving average once it has samples. Else its startup benchmark scaled by the fleet's
  median ratio of measured to benchmarked speed (the first 64 of the fleet), or the bare
  benchmark, but never faster than the fastest measured worker among them (speed is
  earned: a declared benchmark counts only until runs say otherwise); nil when it has
  neither.
]]
--- @include "common"
local function estimate(fleet_key, prefix, wid, app, me)
  local ema = num_in(me.ema, MIN_SPEED, MAX_SPEED)
  if (tonumber(me.n) or 0) > 0 and ema then
    return ema, true
  end
  local bench = num_in(me.bench, MIN_SPEED, MAX_SPEED)
  if not bench then
    return nil, false
  end
  local ratios, fastest = {}, nil
  for _, v in ipairs(redis.call('ZRANGE', fleet_key, '0', '63')) do
    if v ~= wid then
      local v_ema, v_n, v_bench = unpack(redis.call('HMGET', prefix .. 'worker:' .. v,
        'ema:' .. app, 'n:' .. app, 'bench:' .. app))
      local ema_v, b = num_in(v_ema, MIN_SPEED, MAX_SPEED), num_in(v_bench, MIN_SPEED, MAX_SPEED)
      if (tonumber(v_n) or 0) > 0 and ema_v then
        fastest = math.min(fastest or ema_v, ema_v)
        if b then
          ratios[#ratios + 1] = ema_v / b
        end
      end
    end
  end
  if #ratios > 0 then
    table.sort(ratios)
    bench = bench * ratios[math.floor((#ratios + 1) / 2)]
  end
  return math.max(bench, fastest or bench), false
end
