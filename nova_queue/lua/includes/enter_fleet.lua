--[[ enter_fleet: a live worker serves `app` again: it joins the app's worker set and, once
  it has an estimate (its moving average when it has samples, else its startup
  benchmark), the app's fleet scored by it. A benchmark is a worker's own word: it scores
  no faster than the fastest measured worker among the fleet's first 64 (speed is earned).
]]
--- @include "common"
local function enter_fleet(prefix, worker_key, wid, app)
  local fleet_key = prefix .. 'app:' .. app .. ':fleet'
  redis.call('SADD', prefix .. 'app:' .. app .. ':workers', wid)
  local ema, n, bench = unpack(redis.call('HMGET', worker_key, 'ema:' .. app, 'n:' .. app,
    'bench:' .. app))
  ema = num_in(ema, MIN_SPEED, MAX_SPEED)
  if (tonumber(n) or 0) > 0 and ema then
    redis.call('ZADD', fleet_key, num(ema), wid)
    return
  end
  bench = num_in(bench, MIN_SPEED, MAX_SPEED)
  if not bench then
    return
  end
  local members = redis.call('ZRANGE', fleet_key, '0', '63', 'WITHSCORES')
  for i = 1, #members, 2 do
    local v = members[i]
    local v_n = v ~= wid and redis.call('HGET', prefix .. 'worker:' .. v, 'n:' .. app)
    if (tonumber(v_n) or 0) > 0 then
      bench = math.max(bench, tonumber(members[i + 1]) or bench)
      break -- the fleet is in speed order: the first measured one is the fastest
    end
  end
  redis.call('ZADD', fleet_key, num(bench), wid)
end
