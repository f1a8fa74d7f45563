--[[ expire: the retention sweep. Deletes the finished (done, failed or cancelled) jobs whose retention
  ran out, with their tasks and index entries (lua/includes/purge_job.lua; `expiring` holds
  every finished job scored by when it expires, written as it finishes), forgets workers that
  left or were lost longer ago than the retention (forget_worker), and drops tombstones of
  expired jobs older than that (and than a minute), or past MAX_TOMBSTONES: at a steady
  stream of jobs their number, like that of the jobs kept, stops growing. The client runs it after each enqueue
  (it needs DEL, which the worker role lacks: an admin call), so Redis holds at most one
  retention window of finished jobs however long the pool runs. Work is counted in units: a
  task hash deleted costs 1, the rest of a job 8, a worker 4; the caller repeats while the
  answer says more.

  KEYS[1]  expiring zset   nova:{ns}:expiring
  KEYS[2]  departed zset   nova:{ns}:departed
  KEYS[3]  expired zset    nova:{ns}:expired
  KEYS[4]  jobs zset       nova:{ns}:jobs
  KEYS[5]  finished zset   nova:{ns}:finished
  KEYS[6]  failed zset     nova:{ns}:failed
  KEYS[7]  workers zset    nova:{ns}:workers
  KEYS[8]  alive zset      nova:{ns}:alive
  KEYS[9]  meta hash       nova:{ns}:meta
  KEYS[10] events stream   nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] budget: work units for this call (1..2000)
  ARGV[3] retention (s, 0..315360000) of departed workers and of tombstones
  ARGV[4] events MAXLEN (approximate, 1..10^9)

  Returns {0, jobs expired, tasks deleted, workers forgotten, more}: more = 1 when the budget
  ran out or more jobs were due than one call looks at (call again)
    or {-9, message} (BAD_INPUT): nothing written; or the error reply PROTOCOL_MISMATCH
  (lua/includes/check_protocol.lua) before anything is written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "purge_job"
--- @include "forget_worker"

local prefix = ARGV[1]
local budget, retention_s = int_in(ARGV[2], 1, MAX_VISIT), int_in(ARGV[3], 0, MAX_RETENTION_S)
if not budget or not retention_s or not int_in(ARGV[4], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'expiring', 'departed', 'expired', 'jobs', 'finished',
      'failed', 'workers', 'alive', 'meta', 'events' }) then
  return bad_input('budget (1..' .. MAX_VISIT .. '), retention (0..' .. MAX_RETENTION_S
    .. ' s) or events MAXLEN out of range, or KEYS that do not match')
end
check_protocol(KEYS[9])
local ctx = {
  prefix = prefix, expiring = KEYS[1], departed = KEYS[2], expired = KEYS[3], jobs = KEYS[4],
  finished = KEYS[5], failed = KEYS[6], workers = KEYS[7], alive = KEYS[8], events = KEYS[10],
  maxlen = ARGV[4],
}
local now = now_ms()
local left, jobs, tasks, workers = budget, 0, 0, 0
local looked = math.min(MAX_EXPIRE_JOBS, math.ceil(budget / 8))
local due = redis.call('ZRANGEBYSCORE', ctx.expiring, '-inf', int(now), 'LIMIT', 0, looked)
for _, job_id in ipairs(due) do
  if left <= 0 then
    break
  end
  local state = is_job_id(job_id) and redis.call('HGET', prefix .. 'job:' .. job_id, 'state')
  if is_finished(state) or state == 'expired' then
    local n, done = purge_job(ctx, job_id, now, math.max(left - 8, 1), 'retention')
    tasks, left = tasks + n, left - n - 8
    jobs = jobs + (done and 1 or 0)
  else
    redis.call('ZREM', ctx.expiring, job_id) -- retried (its next finish adds it back) or gone
    left = left - 1
  end
end
local gone = {}
if left > 0 then
  gone = redis.call('ZRANGEBYSCORE', ctx.departed, '-inf', int(now - 1000 * retention_s),
    'LIMIT', 0, math.ceil(left / 4))
end
for _, wid in ipairs(gone) do
  workers, left = workers + (forget_worker(ctx, wid) and 1 or 0), left - 4
end
local old = redis.call('ZRANGEBYSCORE', ctx.expired, '-inf',
  int(now - 1000 * math.max(retention_s, MIN_TOMBSTONE_S)), 'LIMIT', 0, MAX_EXPIRE_JOBS)
if #old > 0 then
  redis.call('ZREM', ctx.expired, unpack(old))
end
local excess = redis.call('ZCARD', ctx.expired) - MAX_TOMBSTONES
if excess > 0 then
  redis.call('ZREMRANGEBYRANK', ctx.expired, 0, math.min(excess, MAX_VISIT) - 1)
end
local more = (left <= 0 or #due == looked) and 1 or 0
return { CODE.OK, jobs, tasks, workers, more }
