--[[ note_usage: worker-seconds count toward an owner's recent usage (the usage hash:
  u:<owner> decayed by half every half_life_s, m:<owner> when it was last brought up to
  date), which fair share weighs (owner_order): a claim under fair share charges the
  predicted time, the commit the rest of the run time (negative when it ran shorter).
]]
--- @include "common"
local function note_usage(prefix, owner, run_s, now)
  local key = prefix .. 'usage'
  local u = redis.call('HMGET', key, 'u:' .. owner, 'm:' .. owner, 'half_life_s')
  local half_ms = (num_in(u[3], 1, 1e9) or 3600) * 1000
  local since = math.max(now - (num_in(u[2], 0, 1e15) or now), 0)
  local used = math.max((num_in(u[1], 0, 1e15) or 0) * 2 ^ (-since / half_ms) + run_s, 0)
  redis.call('HSET', key, 'u:' .. owner, num(math.min(used, 1e15)), 'm:' .. owner, int(now))
end
