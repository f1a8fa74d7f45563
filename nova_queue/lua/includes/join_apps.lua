--[[ join_apps: a registered worker joins each app's worker set, stores its benchmark
  estimates (bench_estimates) and, once it has an estimate (its moving average when it
  has samples, else its benchmark), enters the app's fleet scored by it.
]]
--- @include "common"
local function join_apps(prefix, worker_key, wid, apps, estimates)
  for _, app in ipairs(apps) do
    redis.call('SADD', prefix .. 'app:' .. app .. ':workers', wid)
    if #estimates[app] > 0 then
      redis.call('HSET', worker_key, unpack(estimates[app]))
    end
    local w = redis.call('HMGET', worker_key, 'ema:' .. app, 'n:' .. app, 'bench:' .. app)
    local ema = num_in(w[1], MIN_SPEED, MAX_SPEED)
    local estimate = ((tonumber(w[2]) or 0) > 0 and ema) or num_in(w[3], MIN_SPEED, MAX_SPEED)
    if estimate then
      redis.call('ZADD', prefix .. 'app:' .. app .. ':fleet', num(estimate), wid)
    end
  end
end
