--[[ retry: puts a failed task back to pending with fresh attempts (the web gallery's
  requeue action). Its job runs again if it had finished (done, or failed: every task had
  failed); it leaves the post-processing outbox, and finishes (and is post-processed) again.

  KEYS[1] task hash        nova:{ns}:task:<job>:<index>
  KEYS[2] job hash         nova:{ns}:job:<job>
  KEYS[3] pending zset     nova:{ns}:pending:<app>  (the job's app)
  KEYS[4] failed zset      nova:{ns}:failed
  KEYS[5] finished zset    nova:{ns}:finished
  KEYS[6] events stream    nova:{ns}:events
  KEYS[7] meta hash        nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] task id
  ARGV[3] events MAXLEN (approximate, 1..10^9)

  Returns {code}
    0  OK
   -1  UNKNOWN_TASK
   -9  BAD_INPUT {-9, message}: invalid task id, MAXLEN or KEYS (nothing written)
  -11  BAD_STATE (the task is not failed, or its job was cancelled or expired)
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "queue_job"
--- @include "check_protocol"

local task_key, job_key, pending_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, tid = ARGV[1], ARGV[2]
local ctx = { prefix = prefix, events = KEYS[6], maxlen = ARGV[3] }
if not is_task_id(tid) or not int_in(ARGV[3], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'task:' .. tid, 'job:' .. job_of(tid), false, 'failed',
      'finished', 'events', 'meta' }) then
  return bad_input('invalid task id or events MAXLEN, or KEYS that do not match')
end
check_protocol(KEYS[7])
local state = redis.call('HGET', task_key, 'state')
if not state then
  return { CODE.UNKNOWN_TASK }
end
local job_state, priority, seq0, app, owner = unpack(redis.call('HMGET', job_key, 'state',
  'priority', 'seq0', 'app', 'owner'))
if pending_key ~= prefix .. 'pending:' .. (app or '') then
  return bad_input("KEYS[3] is not the pending set of the job's app")
end
if state ~= 'failed' or job_state == 'cancelled' or job_state == 'expired' then
  return { CODE.BAD_STATE, 'task is ' .. state .. ', job is ' .. (job_state or '?') }
end
redis.call('HSET', task_key, 'state', 'pending', 'attempt_count', 0)
redis.call('HDEL', task_key, 'oom')
redis.call('ZADD', pending_key, task_score(priority, seq0, tid), tid)
queue_job(prefix, job_of(tid), app, owner, priority, seq0)
redis.call('ZREM', KEYS[4], tid)
redis.call('HINCRBY', job_key, 'failed', -1)
redis.call('HINCRBY', job_key, 'pending', 1)
if is_finished(job_state) then -- done or failed: it runs again
  redis.call('HSET', job_key, 'state', 'running')
  redis.call('HDEL', job_key, 'finished_ms')
  redis.call('ZREM', KEYS[5], job_of(tid))
end
emit(ctx, 'retried', 'job', job_of(tid), 'task', index_of(tid))
return { CODE.OK }
