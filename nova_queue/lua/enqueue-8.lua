--[[ enqueue: creates a job and writes its tasks, atomically per call.

  A job of at most one chunk is created and published in one call. A larger job is
  created in state 'staging' (invisible to claims), filled chunk by chunk in order,
  and published by the last call; abort-3 deletes an unpublished job. Every chunk is
  validated before anything is written (Lua does not roll back).

  KEYS[1] job hash            nova:{ns}:job:<job>
  KEYS[2] jobs zset           nova:{ns}:jobs
  KEYS[3] staging zset        nova:{ns}:staging
  KEYS[4] stage zset          nova:{ns}:stage:<job>
  KEYS[5] pending zset        nova:{ns}:pending:<app>
  KEYS[6] seq counter         nova:{ns}:seq
  KEYS[7] events stream       nova:{ns}:events
  KEYS[8] apps set            nova:{ns}:apps

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] create: "1" on the first call of a job, else "0"
  ARGV[4] publish: "1" on the last call of a job, else "0"
  ARGV[5] job fields as JSON (create only): app, params (JSON string), priority (int,
          -1000..1000), max_attempts (int >= 1), total (int >= 1), name
  ARGV[6] index of this chunk's first task (must equal the tasks staged so far)
  ARGV[7] events MAXLEN (approximate)
  ARGV[8..] pairs: task input, task cost (number > 0, relative units)

  Returns {code, detail}
    0 OK        detail = tasks written so far
   -7 UNKNOWN_JOB  (not create, and no such job)
   -8 JOB_EXISTS   (create, and the id is taken)
   -9 BAD_INPUT    detail = what is wrong (nothing written)
  -11 BAD_STATE    (job not in staging, or chunk out of order, or publish with missing tasks)
]]
--- @include "common"

local job_key, jobs_key, staging_key, stage_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local pending_key, seq_key, events_key, apps_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local prefix, job_id = ARGV[1], ARGV[2]
local create, publish = ARGV[3] == '1', ARGV[4] == '1'
local start = tonumber(ARGV[6])
local ctx = { prefix = prefix, events = events_key, maxlen = ARGV[7] }
local now = now_ms()

-- validate everything first
local n = (#ARGV - 7) / 2
if n ~= math.floor(n) then
  return { -9, 'task inputs and costs must come in pairs' }
end
for i = 0, n - 1 do
  local cost = tonumber(ARGV[9 + 2 * i])
  if not cost or cost <= 0 or cost ~= cost or cost == math.huge then
    return { -9, 'task ' .. (start + i) .. ': cost must be a positive number' }
  end
end

local app, priority, total, seq0
if create then
  if redis.call('EXISTS', job_key) == 1 then
    return { -8, job_id }
  end
  local ok, meta = pcall(cjson.decode, ARGV[5])
  if not ok or type(meta) ~= 'table' then
    return { -9, 'job fields are not a JSON object' }
  end
  app = meta.app
  priority, total = tonumber(meta.priority) or 0, tonumber(meta.total)
  local max_attempts = tonumber(meta.max_attempts)
  if type(app) ~= 'string' or not string.match(app, '^[A-Za-z0-9_.-]+$') then
    return { -9, 'invalid app name' }
  end
  if priority ~= math.floor(priority) or priority < -1000 or priority > 1000 then
    return { -9, 'priority must be an integer from -1000 to 1000' }
  end
  if not total or total < 1 or total ~= math.floor(total) then
    return { -9, 'a job needs at least one task' }
  end
  if not max_attempts or max_attempts < 1 or max_attempts ~= math.floor(max_attempts) then
    return { -9, 'max_attempts must be an integer >= 1' }
  end
  if start ~= 0 then
    return { -11, 'the first chunk must start at task 0' }
  end
  if n > total or (publish and n ~= total) then
    return { -9, 'job declares ' .. total .. ' tasks but ' .. n .. ' were sent' }
  end
  seq0 = redis.call('INCRBY', seq_key, total) - total
  redis.call('HSET', job_key, 'id', job_id, 'app', app, 'params', meta.params or '{}',
    'priority', int(priority), 'max_attempts', int(max_attempts), 'name', meta.name or '',
    'created_ms', int(now), 'state', 'staging', 'total', int(total), 'staged', 0,
    'pending', 0, 'leased', 0, 'done', 0, 'failed', 0, 'cancelled', 0, 'seq0', int(seq0))
  if not publish then
    redis.call('ZADD', staging_key, now, job_id)
  end
else
  local j = redis.call('HMGET', job_key, 'state', 'app', 'priority', 'total', 'staged', 'seq0')
  if not j[1] then
    return { -7, job_id }
  end
  if j[1] ~= 'staging' then
    return { -11, 'job ' .. job_id .. ' is ' .. j[1] .. ', not staging' }
  end
  if tonumber(j[5]) ~= start then
    return { -11, 'chunk starts at task ' .. start .. ' but ' .. j[5] .. ' are staged' }
  end
  app, priority, total, seq0 = j[2], tonumber(j[3]), tonumber(j[4]), tonumber(j[6])
  if start + n > total then
    return { -9, 'more tasks than the job declares (' .. total .. ')' }
  end
end

-- write: straight into the pending set for a one-call job, else into the stage set
local target = (create and publish) and pending_key or stage_key
-- one score base per call: seq = seq0 + index + 1 (requeues recompute it the same way)
local base = (1000 - priority) * SCORE_PRIORITY_STEP + seq0 + 1
local task_prefix = prefix .. 'task:' .. job_id .. ':'
local tid_prefix = job_id .. ':'
-- ZADD in batches of up to 1000 members: one call per batch, not per task
local batch, b = {}, 0
for i = 0, n - 1 do
  local index = start + i
  redis.call('HSET', task_prefix .. index, 'state', 'pending', 'input', ARGV[8 + 2 * i],
    'cost', ARGV[9 + 2 * i])
  batch[b + 1], batch[b + 2] = string.format('%.0f', base + index), tid_prefix .. index
  b = b + 2
  if b == 2000 or i == n - 1 then
    redis.call('ZADD', target, unpack(batch, 1, b))
    b = 0
  end
end
local staged = redis.call('HINCRBY', job_key, 'staged', n)

if publish then
  if staged ~= total then
    return { -11, 'cannot publish: ' .. staged .. ' of ' .. total .. ' tasks staged' }
  end
  if target == stage_key then
    if redis.call('EXISTS', pending_key) == 0 then
      redis.call('RENAME', stage_key, pending_key) -- O(1) into an empty queue
    else
      -- move the staged members: O(M log N); ZUNIONSTORE would copy the whole backlog
      local moved = 0
      while true do
        local m = redis.call('ZRANGE', stage_key, moved, moved + 999, 'WITHSCORES')
        if #m == 0 then
          break
        end
        local scored = {}
        for i = 1, #m, 2 do
          scored[i], scored[i + 1] = m[i + 1], m[i]
        end
        redis.call('ZADD', pending_key, unpack(scored))
        moved = moved + #m / 2
      end
      redis.call('DEL', stage_key)
    end
    redis.call('ZREM', staging_key, job_id)
  end
  redis.call('HSET', job_key, 'state', 'queued', 'pending', int(total))
  redis.call('ZADD', jobs_key, now, job_id)
  redis.call('SADD', apps_key, app)
  emit(ctx, 'enqueued', 'job', job_id, 'app', app, 'total', int(total))
end
return { 0, staged }
