--[[ enter_fleet: a live worker serves `app` again: it joins the app's worker set and, once
  it has an estimate (its moving average when it has samples, else its startup
  benchmark), the app's fleet scored by it.
]]
--- @include "common"
local function enter_fleet(prefix, worker_key, wid, app)
  redis.call('SADD', prefix .. 'app:' .. app .. ':workers', wid)
  local w = redis.call('HMGET', worker_key, 'ema:' .. app, 'n:' .. app, 'bench:' .. app)
  local ema = num_in(w[1], MIN_SPEED, MAX_SPEED)
  local estimate = ((tonumber(w[2]) or 0) > 0 and ema) or num_in(w[3], MIN_SPEED, MAX_SPEED)
  if estimate then
    redis.call('ZADD', prefix .. 'app:' .. app .. ':fleet', num(estimate), wid)
  end
end
