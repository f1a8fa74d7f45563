--[[ purge: deletes one finished (done, failed or cancelled) job's data from Redis now,
  whatever its retention (`nova-queue purge`), as the retention sweep does
  (lua/includes/purge_job.lua): the job, its tasks (up to `budget` per call; the caller
  repeats while left = 1) and its index entries, leaving a tombstone. A job that has not
  finished (queued, running, staging) is refused: cancel it first. Results in the store are
  the caller's to delete.

  KEYS[1] job hash         nova:{ns}:job:<job>
  KEYS[2] expiring zset    nova:{ns}:expiring
  KEYS[3] expired zset     nova:{ns}:expired
  KEYS[4] jobs zset        nova:{ns}:jobs
  KEYS[5] finished zset    nova:{ns}:finished
  KEYS[6] failed zset      nova:{ns}:failed
  KEYS[7] meta hash        nova:{ns}:meta
  KEYS[8] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] budget: most task hashes deleted in this call (1..2000)
  ARGV[4] events MAXLEN (approximate, 1..10^9)

  Returns {code, tasks deleted, left}
    0  OK           left = 1 while something of the job is left (call again), 0 once it is gone
   -7  UNKNOWN_JOB  no job hash and no task of it: nothing to purge
   -9  BAD_INPUT    {-9, message}: nothing written
  -11  BAD_STATE    {-11, state}: the job has not finished
  or the error reply PROTOCOL_MISMATCH (lua/includes/check_protocol.lua): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "purge_job"

local prefix, job_id, budget = ARGV[1], ARGV[2], int_in(ARGV[3], 1, MAX_VISIT)
if not is_job_id(job_id) or not budget or not int_in(ARGV[4], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'job:' .. job_id, 'expiring', 'expired', 'jobs', 'finished',
      'failed', 'meta', 'events' }) then
  return bad_input('invalid job id, budget (1..' .. MAX_VISIT .. ') or events MAXLEN, or KEYS '
    .. 'that do not match')
end
check_protocol(KEYS[7])
local state = redis.call('HGET', KEYS[1], 'state')
if not state and redis.call('EXISTS', prefix .. 'task:' .. job_id .. ':0') == 0 then
  return { CODE.UNKNOWN_JOB, 0, 0 }
end
if state and not is_finished(state) and state ~= 'expired' then
  return { CODE.BAD_STATE, state }
end
local ctx = {
  prefix = prefix, expiring = KEYS[2], expired = KEYS[3], jobs = KEYS[4], finished = KEYS[5],
  failed = KEYS[6], events = KEYS[8], maxlen = ARGV[4],
}
local n, done = purge_job(ctx, job_id, now_ms(), budget, 'purge')
return { CODE.OK, n, done and 0 or 1 }
