--[[ enqueue: creates a job and writes its tasks, atomically per call.

  A job of at most one chunk is created and published in one call. A larger job is
  created in state 'staging' (invisible to claims), filled chunk by chunk in order,
  and published by the last call; abort-3 deletes an unpublished job. Every chunk is
  validated before anything is written (Lua does not roll back). Publishing moves the
  staged tasks into the pending set: in one O(1) RENAME when that set is empty, else
  2000 per call; while tasks are left to move the job stays 'staging' (claims skip its
  tasks) and the caller repeats the publishing call with no tasks until none are left.

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
  ARGV[5] job fields as JSON (create only, at most 128 KiB): app, params (JSON string of at
          most 64 KiB), priority (int, -1000..1000), max_attempts (int, 1..1000), total
          (int, 1..10^8), name (at most 8 KiB)
  ARGV[6] index of this chunk's first task (must equal the tasks staged so far)
  ARGV[7] events MAXLEN (approximate, 1..10^9)
  ARGV[8..] pairs, at most 10000: task input (at most 64 KiB), task cost (relative units,
          1e-9..1e9)

  Returns {code, detail, left}
    0 OK        detail = tasks written so far; left = tasks still to publish (publish
                calls only: repeat the call with no tasks until it is 0)
   -7 UNKNOWN_JOB  (not create, and no such job)
   -8 JOB_EXISTS   (create, and the id is taken)
   -9 BAD_INPUT    detail = what is wrong (nothing written)
  -11 BAD_STATE    (job not in staging, or chunk out of order, or publish with missing tasks)
]]
--- @include "common"
--- @include "checks"

local job_key, jobs_key, staging_key, stage_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local pending_key, seq_key, events_key, apps_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local prefix, job_id = ARGV[1], ARGV[2]
local create, publish = ARGV[3] == '1', ARGV[4] == '1'
local start = int_in(ARGV[6], 0, MAX_JOB_TASKS)
local ctx = { prefix = prefix, events = events_key, maxlen = ARGV[7] }

-- validate everything first
if not is_job_id(job_id) or not start or not int_in(ARGV[7], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'job:' .. job_id, 'jobs', 'staging', 'stage:' .. job_id,
      false, 'seq', 'events', 'apps' }) then
  return bad_input('invalid job id, first index or events MAXLEN, or KEYS that do not match')
end
if #ARGV > 7 + 2 * MAX_CHUNK then
  return bad_input('at most ' .. MAX_CHUNK .. ' tasks per call')
end
local n = (#ARGV - 7) / 2
if n ~= math.floor(n) then
  return bad_input('task inputs and costs must come in pairs')
end
for i = 0, n - 1 do
  if #ARGV[8 + 2 * i] > MAX_INPUT_BYTES then
    return bad_input('task ' .. (start + i) .. ': input longer than ' .. MAX_INPUT_BYTES
      .. ' bytes')
  end
  if not num_in(ARGV[9 + 2 * i], MIN_COST, MAX_COST) then
    return bad_input('task ' .. (start + i) .. ': cost must be a number from 1e-9 to 1e9')
  end
end
local now = now_ms()

local app, priority, total, seq0
if create then
  if redis.call('EXISTS', job_key) == 1 then
    return { -8, job_id }
  end
  local ok, meta = false, nil
  if #ARGV[5] <= 2 * MAX_META_BYTES then
    ok, meta = pcall(cjson.decode, ARGV[5])
  end
  if not ok or type(meta) ~= 'table' then
    return bad_input('job fields are not a JSON object of at most ' .. 2 * MAX_META_BYTES
      .. ' bytes')
  end
  app = meta.app
  priority, total = int_in(meta.priority or 0, -1000, 1000), int_in(meta.total, 1, MAX_JOB_TASKS)
  local max_attempts = int_in(meta.max_attempts, 1, MAX_ATTEMPTS)
  if not is_name(app, 64) then
    return bad_input('invalid app name')
  end
  if pending_key ~= prefix .. 'pending:' .. app then
    return bad_input("KEYS[5] is not the pending set of the job's app")
  end
  if not priority then
    return bad_input('priority must be an integer from -1000 to 1000')
  end
  if not total then
    return bad_input('a job needs 1 to ' .. MAX_JOB_TASKS .. ' tasks')
  end
  if not max_attempts then
    return bad_input('max_attempts must be an integer from 1 to ' .. MAX_ATTEMPTS)
  end
  if (meta.params ~= nil and (type(meta.params) ~= 'string' or #meta.params > MAX_PARAMS_BYTES))
      or (meta.name ~= nil and (type(meta.name) ~= 'string' or #meta.name > MAX_TEXT_BYTES)) then
    return bad_input('params must be a JSON string of at most ' .. MAX_PARAMS_BYTES
      .. ' bytes and name a string of at most ' .. MAX_TEXT_BYTES)
  end
  if start ~= 0 then
    return { -11, 'the first chunk must start at task 0' }
  end
  if n > total or (publish and n ~= total) then
    return bad_input('job declares ' .. total .. ' tasks but ' .. n .. ' were sent')
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
  app, priority = j[2], int_in(j[3], -1000, 1000)
  total, seq0 = int_in(j[4], 1, MAX_JOB_TASKS), int_in(j[6], 0, 2 ^ 42)
  if not is_name(app, 64) or not priority or not total or not seq0 then
    return { -11, 'job ' .. job_id .. ' has invalid fields' }
  end
  if pending_key ~= prefix .. 'pending:' .. app then
    return bad_input("KEYS[5] is not the pending set of the job's app")
  end
  if tonumber(j[5]) ~= start then
    return { -11, 'chunk starts at task ' .. start .. ' but ' .. tostring(j[5]) .. ' are staged' }
  end
  if start + n > total then
    return bad_input('more tasks than the job declares (' .. total .. ')')
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

if not publish then
  return { 0, staged, 0 }
end
if staged ~= total then
  return { -11, 'cannot publish: ' .. staged .. ' of ' .. total .. ' tasks staged' }
end
if target == stage_key then
  if redis.call('EXISTS', pending_key) == 0 then
    redis.call('RENAME', stage_key, pending_key) -- O(1) into an empty queue
  else
    -- move up to MAX_VISIT staged members: O(M log N); ZUNIONSTORE would copy the whole
    -- backlog. The moved tasks wait in the pending set, skipped by claims, until the last.
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
    local left = redis.call('ZCARD', stage_key)
    if left > 0 then
      return { 0, staged, left }
    end
  end
  redis.call('ZREM', staging_key, job_id)
end
redis.call('HSET', job_key, 'state', 'queued', 'pending', int(total))
redis.call('ZADD', jobs_key, now, job_id)
redis.call('SADD', apps_key, app)
emit(ctx, 'enqueued', 'job', job_id, 'app', app, 'total', int(total))
return { 0, staged, 0 }
