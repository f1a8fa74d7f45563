--[[ join_apps: a registered worker stores its benchmark estimates (bench_estimates) for each
  app and, unless it is quarantined (a worker that re-joins keeps its quarantine), enters
  each app's worker set and fleet (enter_fleet).
]]
--- @include "enter_fleet"
local function join_apps(prefix, worker_key, wid, apps, estimates, quarantined)
  for _, app in ipairs(apps) do
    if #estimates[app] > 0 then
      redis.call('HSET', worker_key, unpack(estimates[app]))
    end
    if not quarantined then
      enter_fleet(prefix, worker_key, wid, app)
    end
  end
end
