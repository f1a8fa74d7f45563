--[[ move_staged: publishing moves a job's staged tasks into the pending set: in one O(1)
  RENAME when that set is empty; when it holds at most MAX_VISIT tasks, fewer than the
  stage set, the other way round: that backlog into the stage set, which then becomes the
  pending set (RENAME), in one call, O(M log N) for a backlog of M; else MAX_VISIT per call,
  O(M log N) (ZUNIONSTORE would copy the whole backlog); moved tasks wait in the pending
  set, skipped by claims while the job is staging. Returns how many are left to move (the
  caller publishes again).
]]
--- @include "common"
local function move_staged(stage_key, pending_key)
  -- ZADD to `key` the pairs (member, score) m[from..to] of a ZRANGE WITHSCORES, 1000 a call
  local function add_scored(key, m, from, to)
    for first = from, to, 2000 do
      local scored = {}
      for i = first, math.min(first + 1999, to), 2 do
        scored[#scored + 1], scored[#scored + 2] = m[i + 1], m[i]
      end
      redis.call('ZADD', key, unpack(scored))
    end
  end

  local backlog = redis.call('ZCARD', pending_key)
  if backlog == 0 then
    redis.call('RENAME', stage_key, pending_key) -- O(1) into an empty queue
    return 0
  end
  if backlog <= MAX_VISIT and backlog < redis.call('ZCARD', stage_key) then
    -- a short queue joins the job's tasks rather than the job's tasks the queue
    local m = redis.call('ZRANGE', pending_key, 0, -1, 'WITHSCORES')
    add_scored(stage_key, m, 1, #m)
    redis.call('RENAME', stage_key, pending_key)
    return 0
  end
  local m = redis.call('ZRANGE', stage_key, 0, MAX_VISIT - 1, 'WITHSCORES')
  add_scored(pending_key, m, 1, #m)
  for from = 1, #m, 2000 do
    local members = {}
    for i = from, math.min(from + 1999, #m), 2 do
      members[#members + 1] = m[i]
    end
    redis.call('ZREM', stage_key, unpack(members))
  end
  return redis.call('ZCARD', stage_key)
end
