--[[ place_task: doctor's repair of one task's placement, checked atomically here (what the
  doctor read outside a script may have changed since). The task must be in exactly the
  places its state says: pending -> its app's pending set (unless its job is still staging)
  and its job in its owner's queue (queue_job, which fair share walks);
  leased -> the lease set, and the held sets of its worker and of its backup attempt's
  (b_worker) when they exist, with a lease held by a worker Redis does not know due now (its
  deadline_ms too: the reaper then requeues it); failed -> the failed set; no other state in any of them. Nothing
  committed changes: a task's state and result stay as they are. fix = false only says what
  it would do. ctx fields used: prefix, leases, failed. Returns what it did, comma-separated
  ('' when the task was in place, or is not a task of an existing job: orphans stay).
]]
--- @include "common"
--- @include "queue_job"
local function place_task(ctx, tid, now, fix)
  local state, worker, deadline_ms, b_worker = unpack(redis.call('HMGET',
    ctx.prefix .. 'task:' .. tid, 'state', 'worker', 'deadline_ms', 'b_worker'))
  local app, priority, seq0, job_state, owner = unpack(redis.call('HMGET',
    ctx.prefix .. 'job:' .. job_of(tid), 'app', 'priority', 'seq0', 'state', 'owner'))
  if not state or not is_name(app, 64) then
    return ''
  end
  local done, pending_key = {}, ctx.prefix .. 'pending:' .. app
  local function act(what, ...)
    done[#done + 1] = what
    if fix then
      redis.call(...)
    end
  end
  local in_pending = redis.call('ZSCORE', pending_key, tid)
  local lease = tonumber(redis.call('ZSCORE', ctx.leases, tid))
  if state == 'pending' then
    if not in_pending and job_state ~= 'staging' then
      act('requeued', 'ZADD', pending_key, task_score(priority, seq0, tid), tid)
      if fix then
        queue_job(ctx.prefix, job_of(tid), app, owner, priority, seq0)
      end
    end
  elseif in_pending then
    act('left pending', 'ZREM', pending_key, tid)
  end
  if state == 'leased' then
    local known = is_name(worker, 128)
      and redis.call('EXISTS', ctx.prefix .. 'worker:' .. worker) == 1
    if not known and (not lease or lease >= now) then
      act('lease of an unknown worker due now', 'ZADD', ctx.leases, now - 1, tid)
      if fix then -- the reaper goes by the task's own deadline
        redis.call('HSET', ctx.prefix .. 'task:' .. tid, 'deadline_ms', int(now - 1))
      end
    elseif not lease then
      act('back in the lease set', 'ZADD', ctx.leases, int_in(deadline_ms, 0, 1e15) or now, tid)
    end
    for _, wid in ipairs({ known and worker or false, b_worker or false }) do
      if is_name(wid, 128) and redis.call('EXISTS', ctx.prefix .. 'worker:' .. wid) == 1
          and redis.call('SISMEMBER', ctx.prefix .. 'held:' .. wid, tid) == 0 then
        act('held by ' .. wid, 'SADD', ctx.prefix .. 'held:' .. wid, tid)
      end
    end
  elseif lease then
    act('left the lease set', 'ZREM', ctx.leases, tid)
  end
  local in_failed = redis.call('ZSCORE', ctx.failed, tid)
  if state == 'failed' and not in_failed then
    act('listed failed', 'ZADD', ctx.failed, now, tid)
  elseif state ~= 'failed' and in_failed then
    act('left failed', 'ZREM', ctx.failed, tid)
  end
  return table.concat(done, ',')
end
