--[[ index_job: doctor's repair of a job's index entries, checked atomically: a published
  job (not staging, not expired) in `jobs` (scored by created_ms), a staging one in `staging`
  (so it is reaped when abandoned), a finished one (done, failed or cancelled) in the
  retention index `expiring` (one a release before retention finished has none: it gets
  finished_ms plus its retention), one with pending tasks in its owner's queue of the app
  (queue_job: a release before fair share wrote none). fix = false only says what it would
  do. ctx fields used: jobs, staging, expiring, prefix. Returns what it did ('' if nothing).
]]
--- @include "common"
--- @include "queue_job"
local function index_job(ctx, job_id, now, fix)
  local state, created_ms, finished_ms, retention_s, app, owner, priority, seq0, pending =
    unpack(redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, 'state', 'created_ms',
    'finished_ms', 'retention_s', 'app', 'owner', 'priority', 'seq0', 'pending'))
  if not state then
    return ''
  end
  local done, created = {}, int_in(created_ms, 0, 1e15) or now
  local function add(what, key, score)
    if not redis.call('ZSCORE', key, job_id) then
      done[#done + 1] = what
      if fix then
        redis.call('ZADD', key, int(score), job_id)
      end
    end
  end
  if state == 'staging' then
    add('listed staging', ctx.staging, created)
  elseif state ~= 'expired' then
    add('listed in jobs', ctx.jobs, created)
  end
  if is_finished(state) then
    retention_s = int_in(retention_s, 0, MAX_RETENTION_S) or DEFAULT_RETENTION_S
    add('retention entry', ctx.expiring, (int_in(finished_ms, 0, 1e15) or now)
      + 1000 * retention_s)
  end
  local base = is_name(app, 64) and ctx.prefix .. 'app:' .. app .. ':'
  if base and (state == 'queued' or state == 'running')
      and (int_in(pending, 0, MAX_JOB_TASKS) or 0) > 0
      and (not redis.call('ZSCORE', base .. 'owner:' .. (owner or ''), job_id)
        or redis.call('SISMEMBER', base .. 'owners', owner or '') == 0) then
    done[#done + 1] = "in its owner's queue"
    if fix then
      queue_job(ctx.prefix, job_id, app, owner, priority, seq0)
    end
  end
  return table.concat(done, ',')
end
