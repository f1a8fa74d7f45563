--[[ enqueue: creates a job and writes its tasks, atomically per call.

  A job of at most one chunk is created and published in one call. A larger job is
  created in state 'staging' (invisible to claims), filled chunk by chunk in order,
  and published by the last call; abort-4 deletes an unpublished job. Every chunk is
  validated before anything is written (Lua does not roll back). Publishing moves the
  staged tasks into the pending set: in one O(1) RENAME when that set is empty, in one
  call when it holds fewer tasks than the job and at most 2000 (they join the stage set,
  which becomes the pending set), else 2000 per call; while tasks are left to move the job
  stays 'staging' (claims skip its tasks) and the caller repeats the publishing call with
  no tasks until none are left.

  KEYS[1] job hash            nova:{ns}:job:<job>
  KEYS[2] jobs zset           nova:{ns}:jobs
  KEYS[3] staging zset        nova:{ns}:staging
  KEYS[4] stage zset          nova:{ns}:stage:<job>
  KEYS[5] pending zset        nova:{ns}:pending:<app>
  KEYS[6] seq counter         nova:{ns}:seq
  KEYS[7] events stream       nova:{ns}:events
  KEYS[8] apps set            nova:{ns}:apps
  KEYS[9] meta hash           nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] create: "1" on the first call of a job, else "0"
  ARGV[4] publish: "1" on the last call of a job, else "0"
  ARGV[5] job fields as JSON (create only, at most 128 KiB): app, params (JSON string of at
          most 64 KiB), priority (int, -1000..1000), max_attempts (int, 1..1000), total
          (int, 1..10^8), name (at most 8 KiB), retention_s (int, 0..315360000: how long the
          finished job stays in Redis; default 604800)
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
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "check_task_pairs"
--- @include "create_job"
--- @include "staged_job"
--- @include "write_tasks"
--- @include "move_staged"
--- @include "queue_job"

local K = {
  job = KEYS[1], jobs = KEYS[2], staging = KEYS[3], stage = KEYS[4], pending = KEYS[5],
  seq = KEYS[6], events = KEYS[7], apps = KEYS[8], meta = KEYS[9],
}
local a = {
  prefix = ARGV[1], job_id = ARGV[2], create = ARGV[3] == '1', publish = ARGV[4] == '1',
  fields = ARGV[5], start = int_in(ARGV[6], 0, MAX_JOB_TASKS),
  maxlen = int_in(ARGV[7], 1, MAX_EVENTS_MAXLEN) and ARGV[7],
}

-- validate everything first
if not is_job_id(a.job_id) or not a.start or not a.maxlen
    or not keys_are(a.prefix, KEYS, { 'job:' .. a.job_id, 'jobs', 'staging', 'stage:' .. a.job_id,
      false, 'seq', 'events', 'apps', 'meta' }) then
  return bad_input('invalid job id, first index or events MAXLEN, or KEYS that do not match')
end
local n, bad = check_task_pairs(ARGV, a.start)
if not n then
  return bad_input(bad)
end
check_protocol(K.meta)
local now = now_ms()
local job, refused
if a.create then
  job, refused = create_job(K, a, n, now)
else
  job, refused = staged_job(K, a, n)
end
if not job then
  return refused
end

-- write: straight into the pending set for a one-call job, else into the stage set
local target = (a.create and a.publish) and K.pending or K.stage
write_tasks(target, a, job, ARGV, n)
local staged = redis.call('HINCRBY', K.job, 'staged', n)
if not a.publish then
  return { CODE.OK, staged, 0 }
end
if staged ~= job.total then
  return { CODE.BAD_STATE, 'cannot publish: ' .. staged .. ' of ' .. job.total .. ' tasks staged' }
end
if target == K.stage then
  local left = move_staged(K.stage, K.pending)
  if left > 0 then
    return { CODE.OK, staged, left }
  end
  redis.call('ZREM', K.staging, a.job_id)
end
redis.call('HSET', K.job, 'state', 'queued', 'pending', int(job.total))
redis.call('ZADD', K.jobs, now, a.job_id)
redis.call('SADD', K.apps, job.app)
queue_job(a.prefix, a.job_id, job.app, job.owner, job.priority, job.seq0)
emit({ prefix = a.prefix, events = K.events, maxlen = a.maxlen }, 'enqueued', 'job', a.job_id,
  'app', job.app, 'total', int(job.total))
return { CODE.OK, staged, 0 }
