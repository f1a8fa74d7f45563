--[[ set_warm: worker wid now holds (or is loading) model `new` for `app` ('' for none):
  its warm:<app> field, and the app's count of workers per model (app:<app>:warm, what
  prefer_model spreads jobs by) moves from `old` to `new`.
]]
--- @include "common"
local function set_warm(prefix, app, worker_key, old, new)
  if old == new then
    return
  end
  local counts = prefix .. 'app:' .. app .. ':warm'
  if old and old ~= '' and (tonumber(redis.call('HINCRBY', counts, old, -1)) or 0) <= 0 then
    redis.call('HDEL', counts, old)
  end
  if new and new ~= '' then
    redis.call('HINCRBY', counts, new, 1)
    redis.call('HSET', worker_key, 'warm:' .. app, new)
  else
    redis.call('HDEL', worker_key, 'warm:' .. app)
  end
end
