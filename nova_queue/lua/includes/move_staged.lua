--[[ move_staged: publishing moves a job's staged tasks into the pending set: in one O(1)
  RENAME when that set is empty, else MAX_VISIT per call, O(M log N) (ZUNIONSTORE would
  copy the whole backlog); moved tasks wait in the pending set, skipped by claims while
  the job is staging. Returns how many are left to move (the caller publishes again).
]]
--- @include "common"
local function move_staged(stage_key, pending_key)
  if redis.call('EXISTS', pending_key) == 0 then
    redis.call('RENAME', stage_key, pending_key) -- O(1) into an empty queue
    return 0
  end
  local m = redis.call('ZRANGE', stage_key, 0, MAX_VISIT - 1, 'WITHSCORES')
  for from = 1, #m, 2000 do
    local scored = {}
    for i = from, math.min(from + 1999, #m), 2 do
      scored[#scored + 1], scored[#scored + 2] = m[i + 1], m[i]
    end
    redis.call('ZADD', pending_key, unpack(scored))
    local members = {}
    for i = 1, #scored, 2 do
      members[#members + 1] = scored[i + 1]
    end
    redis.call('ZREM', stage_key, unpack(members))
  end
  return redis.call('ZCARD', stage_key)
end
