--[[ common: time, number formatting, events, job completion. Included by every script.
  ctx fields used here: prefix, events, maxlen, finished.
]]
local SCORE_PRIORITY_STEP = 4398046511104 -- 2^42: seq space per priority level

-- Redis TIME in milliseconds: the one clock every worker agrees on.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as exact decimal strings (Lua's tostring keeps only 14 digits).
local function int(x)
  return string.format('%.0f', x)
end

local function num(x)
  return string.format('%.10g', x)
end

-- Pending-set score: higher priority first, then FIFO by seq.
local function pending_score(priority, seq)
  return int((1000 - (tonumber(priority) or 0)) * SCORE_PRIORITY_STEP + tonumber(seq))
end

-- A task's seq is its job's seq0 + index + 1 (seq0 is reserved at enqueue), so a
-- requeued task returns to its old place without storing seq in every task hash.
local function task_score(priority, seq0, tid)
  return pending_score(priority, (tonumber(seq0) or 0) + tonumber(string.match(tid, ':(%d+)$')) + 1)
end

local function emit(ctx, etype, ...)
  redis.call('XADD', ctx.events, 'MAXLEN', '~', ctx.maxlen, '*', 'type', etype, ...)
end

local function job_of(tid)
  return string.match(tid, '^(.*):%d+$')
end

local function index_of(tid)
  return string.match(tid, ':(%d+)$')
end

-- Marks the job finished once every task is terminal; returns 1 if this call finished it.
-- c = the job's current {total, done, failed, cancelled, state, finished_ms}.
local function finish_job_with(ctx, job_key, job_id, now, c)
  local total = tonumber(c[1]) or 0
  local terminal = (tonumber(c[2]) or 0) + (tonumber(c[3]) or 0) + (tonumber(c[4]) or 0)
  if total == 0 or terminal < total or c[6] then
    return 0
  end
  local state = c[5]
  if state ~= 'cancelled' then
    state = 'done'
    redis.call('ZADD', ctx.finished, now, job_id)
  end
  redis.call('HSET', job_key, 'state', state, 'finished_ms', int(now))
  emit(ctx, 'job_finished', 'job', job_id, 'state', state, 'done', c[2] or '0',
    'failed', c[3] or '0', 'cancelled', c[4] or '0')
  return 1
end

local function finish_job_if_done(ctx, job_key, job_id, now)
  return finish_job_with(ctx, job_key, job_id, now,
    redis.call('HMGET', job_key, 'total', 'done', 'failed', 'cancelled', 'state', 'finished_ms'))
end
