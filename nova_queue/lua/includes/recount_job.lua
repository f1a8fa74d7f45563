--[[ recount_job: doctor's recount of a job's task counts from its tasks' states, MAX_VISIT
  tasks per call from index `from` up to the first missing one; c: the counts so far
  in STATE_COUNTS' order (numbers the caller carries from call to call).
  The last call writes the counts that differ and, every task being terminal, finishes the
  job (finish_job_if_done: it enters the retention index; one that finished has
  finished_ms). A job of at most MAX_VISIT tasks
  is recounted in one atomic call; a larger one is exact while its tasks do not change
  between the calls. fix = false only says what it would do. ctx: prefix, events, maxlen.
  Returns the next index (nil: done), the counts, and what it did ('' if nothing).
]]
--- @include "common"
local function recount_job(ctx, job_id, from, c, now, fix)
  local states = { pending = STATE_COUNTS.pending, leased = STATE_COUNTS.leased,
    done = STATE_COUNTS.done, failed = STATE_COUNTS.failed, cancelled = STATE_COUNTS.cancelled }
  local task_prefix = ctx.prefix .. 'task:' .. job_id .. ':'
  local index = from
  while index < from + MAX_VISIT do
    local state = redis.call('HGET', task_prefix .. index, 'state')
    if not state then
      break
    end
    local i = states[state]
    if i then
      c[i] = c[i] + 1
    end
    index = index + 1
  end
  if index == from + MAX_VISIT then
    return index, c, ''
  end
  local job_key = ctx.prefix .. 'job:' .. job_id
  local j = redis.call('HMGET', job_key, unpack(RECOUNT_JOB))
  local changed = {}
  for i, name in ipairs({ unpack(STATE_COUNTS) }) do
    if tonumber(j[i]) ~= c[i] then -- RECOUNT_JOB begins with STATE_COUNTS
      changed[#changed + 1] = name .. ' ' .. tostring(j[i] or 'none') .. ' -> ' .. int(c[i])
      if fix then
        redis.call('HSET', job_key, name, int(c[i]))
      end
    end
  end
  local pending, leased, done, failed, cancelled = unpack(c)
  local seen, ended = pending + leased + done + failed + cancelled, done + failed + cancelled
  local state = j[RECOUNT_JOB.state]
  if seen > 0 and ended == seen and tonumber(j[RECOUNT_JOB.total]) == seen
      and not j[RECOUNT_JOB.finished_ms] and state ~= 'staging' and state ~= 'expired' then
    changed[#changed + 1] = 'finished' -- every task ended: the job finishes
    if fix then
      finish_job_if_done(ctx, job_key, job_id, now)
    end
  end
  return nil, c, table.concat(changed, ', ')
end
