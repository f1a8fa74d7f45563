--[[ bench_estimates: a registering worker's startup benchmark (decoded JSON: app ->
  {bench_s, load_s, cold_s}, any missing) as app -> {'bench:<app>', value, ...} for HSET,
  for each of its apps; or nil and what is wrong (a value that is not a number 0..1e12).
]]
--- @include "common"
local function bench_estimates(apps, bench)
  local estimates = {}
  for _, app in ipairs(apps) do
    local b = bench[app]
    local e = {}
    if type(b) == 'table' then
      for _, name in ipairs({ 'bench', 'load', 'cold' }) do
        local v = b[name .. '_s']
        if v ~= nil and v ~= cjson.null then
          local x = num_in(v, 0, MAX_SPEED)
          if not x then
            return nil, app .. ': ' .. name .. '_s must be a number from 0 to 1e12'
          end
          e[#e + 1], e[#e + 2] = name .. ':' .. app, num(x)
        end
      end
    end
    estimates[app] = e
  end
  return estimates
end
