--[[ repair: one of `nova-queue doctor`'s checks, or its repair, run atomically, so a doctor
  on a live pool reports (and fixes) only what holds when Redis runs this, whatever changed
  since it read the namespace. Nothing committed changes: no task's state or result is
  written; tasks go back where their state says, counts follow the tasks' states, index
  entries are added or dropped. Mode "check" says what "fix" would do.

  KEYS[1]  leases zset      nova:{ns}:leases
  KEYS[2]  inflight hash    nova:{ns}:inflight
  KEYS[3]  failed zset      nova:{ns}:failed
  KEYS[4]  finished zset    nova:{ns}:finished
  KEYS[5]  jobs zset        nova:{ns}:jobs
  KEYS[6]  staging zset     nova:{ns}:staging
  KEYS[7]  expiring zset    nova:{ns}:expiring
  KEYS[8]  departed zset    nova:{ns}:departed
  KEYS[9]  alive zset       nova:{ns}:alive
  KEYS[10] workers zset     nova:{ns}:workers
  KEYS[11] meta hash        nova:{ns}:meta
  KEYS[12] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] events MAXLEN (approximate, 1..10^9)
  ARGV[3] mode: "check" | "fix"
  ARGV[4] op and ARGV[5..] its arguments:
          "task" TID               the task's placement (lua/includes/place_task.lua)
          "member" KIND NAME M     a member naming no task there (drop_member): KIND pending
                                   (NAME: app), leases, failed or held (NAME: worker id)
          "recount" JOB FROM P L D F C   the job's counts from task FROM on, with the counts
                                   so far (recount_job; call again from the next index)
          "job" JOB                its index entries (index_job)
          "inflight" APP           inflight[APP] (recount_inflight)
          "worker" WID             its index entries (index_worker)

  Returns {0, what it did or would do ('' if nothing), next index (recount; -1 when done,
  else 0), the counts (recount)}
    or {-9, message} (BAD_INPUT): nothing written; or the error reply PROTOCOL_MISMATCH
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "place_task"
--- @include "drop_member"
--- @include "recount_job"
--- @include "index_job"
--- @include "index_worker"
--- @include "recount_inflight"

local prefix, mode, op = ARGV[1], ARGV[3], ARGV[4]
local id = ARGV[5] -- the op's task, job, app or worker (member: KIND, then NAME and M)
local kind, name, member, from = ARGV[5], ARGV[6], ARGV[7], ARGV[6]
if not int_in(ARGV[2], 1, MAX_EVENTS_MAXLEN) or (mode ~= 'check' and mode ~= 'fix')
    or not keys_are(prefix, KEYS, { 'leases', 'inflight', 'failed', 'finished', 'jobs',
      'staging', 'expiring', 'departed', 'alive', 'workers', 'meta', 'events' }) then
  return bad_input('invalid events MAXLEN or mode, or KEYS that do not match')
end
local counts, counted = {}, true
for i = 1, 5 do
  counts[i] = int_in(ARGV[6 + i], 0, MAX_JOB_TASKS)
  counted = counted and counts[i] ~= nil
end
local ok = (op == 'task' and is_task_id(id)) or ((op == 'job' or op == 'recount')
  and is_job_id(id)) or (op == 'inflight' and is_name(id, 64))
  or (op == 'worker' and is_name(id, 128)) or (op == 'member' and type(member) == 'string'
    and #member <= 200 and ((kind == 'pending' and is_name(name, 64)) or (kind == 'held'
      and is_name(name, 128)) or kind == 'leases' or kind == 'failed'))
if not ok or (op == 'recount' and not (int_in(from, 0, MAX_JOB_TASKS) and counted)) then
  return bad_input('unknown op, or arguments that do not fit it')
end
check_protocol(KEYS[11])
local ctx = {
  prefix = prefix, leases = KEYS[1], inflight = KEYS[2], failed = KEYS[3], finished = KEYS[4],
  jobs = KEYS[5], staging = KEYS[6], expiring = KEYS[7], departed = KEYS[8], alive = KEYS[9],
  workers = KEYS[10], events = KEYS[12], maxlen = ARGV[2],
}
local now, fix, what, nxt, skipped = now_ms(), mode == 'fix', '', 0, false
if op == 'task' then
  what = place_task(ctx, id, now, fix)
elseif op == 'member' then
  what = drop_member(ctx, kind, name, member, fix)
elseif op == 'recount' then
  nxt, counts, what = recount_job(ctx, id, tonumber(from), counts, now, fix)
  nxt = nxt or -1
elseif op == 'job' then
  what = index_job(ctx, id, now, fix)
elseif op == 'inflight' then
  what = recount_inflight(ctx, id, fix)
  skipped = what == nil
  what = what or ('not counted: more than ' .. MAX_VISIT .. ' leases')
else
  what = index_worker(ctx, id, now, fix)
end
if fix and what ~= '' and not skipped then
  emit(ctx, 'repaired', 'op', op, 'target', op == 'member' and member or id, 'what', what)
end
return { CODE.OK, what, nxt, unpack(op == 'recount' and counts or {}) }
