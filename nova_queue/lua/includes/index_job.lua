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
  local j = redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, 'state', 'created_ms',
    'finished_ms', 'retention_s', 'app', 'owner', 'priority', 'seq0', 'pending')
  if not j[1] then
    return ''
  end
  local done, created = {}, int_in(j[2], 0, 1e15) or now
  local function add(what, key, score)
    if not redis.call('ZSCORE', key, job_id) then
      done[#done + 1] = what
      if fix then
        redis.call('ZADD', key, int(score), job_id)
      end
    end
  end
  if j[1] == 'staging' then
    add('listed staging', ctx.staging, created)
  elseif j[1] ~= 'expired' then
    add('listed in jobs', ctx.jobs, created)
  end
  if j[1] == 'done' or j[1] == 'failed' or j[1] == 'cancelled' then
    local retention_s = int_in(j[4], 0, MAX_RETENTION_S) or DEFAULT_RETENTION_S
    add('retention entry', ctx.expiring, (int_in(j[3], 0, 1e15) or now) + 1000 * retention_s)
  end
  local base = is_name(j[5], 64) and ctx.prefix .. 'app:' .. j[5] .. ':'
  if base and (j[1] == 'queued' or j[1] == 'running')
      and (int_in(j[9], 0, MAX_JOB_TASKS) or 0) > 0 and (not redis.call('ZSCORE', base .. 'owner:' .. (j[6] or ''), job_id)
        or redis.call('SISMEMBER', base .. 'owners', j[6] or '') == 0) then
    done[#done + 1] = "in its owner's queue"
    if fix then
      queue_job(ctx.prefix, job_id, j[5], j[6], j[7], j[8])
    end
  end
  return table.concat(done, ',')
end
