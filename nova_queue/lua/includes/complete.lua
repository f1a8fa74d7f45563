--[[ complete: the body of complete-11 as a function, so that complete_claim-15 can run
  it before a claim. K and A are complete-11's KEYS and ARGV (see its header for the
  contract); returns complete-11's reply.
]]

-- The report's identity (checked before the fence): sizes, KEYS, events MAXLEN. The
-- worker id, lease_gen and attempt id need no pattern here: the fence compares them with
-- what claim wrote (and checked), and a stale report only records them in an event.
local function check_commit_ids(K, A)
  local tid = A[3]
  local job_id = #A >= 11 and #tid <= 80 and job_of(tid)
  if not job_id or #A[2] > 128 or #A[4] > 20 or #A[5] > 64
      or not int_in(A[10], 1, MAX_EVENTS_MAXLEN) then
    return 'invalid worker id, task id, lease_gen, attempt id or events MAXLEN'
  end
  if K[1] ~= A[1] .. 'task:' .. tid or K[2] ~= A[1] .. 'job:' .. job_id then
    return "KEYS[1] and KEYS[2] are not the reported task's and its job's"
  end
  return nil
end

-- The lease holder's report (checked after the fence, before anything is written): the
-- result key names this very lease (nova_queue/keys.py, result_key), numbers in range.
local function check_commit_report(A, job_id, index)
  local head = 'jobs/' .. job_id .. '/results/' .. string.format('%05d', tonumber(index))
    .. '-g' .. A[4] .. '-' .. A[5] .. '.'
  local key = A[6]
  if type(key) ~= 'string' or #key > #head + 16 or string.find(key, head, 1, true) ~= 1
      or not string.find(key, '^[A-Za-z0-9]+$', #head + 1) then
    return 'the result key must be ' .. head .. '<ext>'
  end
  if not num_in(A[7], 0, MAX_RUN_S) then
    return 'run_s must be a number from 0 to ' .. MAX_RUN_S
  end
  local alpha = num_in(A[9], 0, 1)
  if (A[8] ~= '0' and A[8] ~= '1') or not alpha or alpha <= 0 then
    return 'warm must be 0 or 1 and the moving-average weight in (0, 1]'
  end
  if type(A[11]) ~= 'string' or #A[11] > MAX_META_BYTES or string.sub(A[11], 1, 1) ~= '{' then
    return 'provenance must be a JSON object of at most ' .. MAX_META_BYTES .. ' bytes'
  end
  return nil
end

local function complete_task(K, A)
  local bad = check_commit_ids(K, A)
  if bad then
    return bad_input(bad)
  end
  local task_key, job_key, worker_key, held_key = K[1], K[2], K[3], K[4]
  local fleet_key, leases_key = K[5], K[6]
  local prefix, wid, tid, gen, attempt_id = A[1], A[2], A[3], A[4], A[5]
  local result_key, run_s, warm, alpha = A[6], tonumber(A[7]), A[8] == '1', tonumber(A[9])
  local ctx = {
    prefix = prefix, leases = leases_key, alive = K[7], inflight = K[8], failed = K[9],
    finished = K[10], events = K[11], maxlen = A[10],
  }
  local now = now_ms()
  local job_id, index = job_of(tid), index_of(tid)

  local t = redis.call('HMGET', task_key, 'state', 'worker', 'lease_gen', 'attempt_id', 'result', 'cost')
  if not t[1] then
    return { -1, 0 }
  end
  if t[1] == 'done' and t[2] == wid and t[3] == gen and t[4] == attempt_id
      and t[5] == result_key then
    return { 1, 0 } -- this exact commit already took effect (its reply was lost)
  end
  local code = fence(t, wid, gen, attempt_id)
  local j = redis.call('HMGET', job_key, 'state', 'app', 'total', 'done', 'failed', 'cancelled',
    'finished_ms', 'leased')
  if code == 0 then
    bad = check_commit_report(A, job_id, index)
    if bad then
      return bad_input(bad)
    end
  end
  if code == 0 and j[1] == 'cancelled' then
    release(ctx, tid, now, 'cancelled', 'job cancelled', false)
    code = -6
  end
  if code ~= 0 then
    reject_stale(ctx, tid, wid, 'complete', gen, t, code)
    return { code, 0 }
  end

  local app = j[2]
  if warm then
    redis.call('HSET', task_key, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
      'run_s', num(run_s), 'warm', '1', 'meta', A[11])
  else
    redis.call('HSET', task_key, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
      'run_s', num(run_s), 'warm', '0', 'meta', A[11], 'cold_s', num(run_s))
  end
  redis.call('ZREM', leases_key, tid)
  redis.call('SREM', held_key, tid)
  redis.call('HINCRBY', ctx.inflight, app, -1)
  -- the job's counts: one read above, one write here (nothing else touches them in between)
  local done_n = (tonumber(j[4]) or 0) + 1
  redis.call('HSET', job_key, 'leased', int((tonumber(j[8]) or 0) - 1), 'done', int(done_n))

  -- the worker's speed: moving average of warm runs, cold runs kept apart; one read, one write
  local w = redis.call('HMGET', worker_key, 'id', 'tasks_done', 'done:' .. app, 'ema:' .. app, 'n:' .. app)
  if w[1] then
    local update = { 'tasks_done', (tonumber(w[2]) or 0) + 1, 'done:' .. app, (tonumber(w[3]) or 0) + 1 }
    local cost = num_in(t[6], MIN_COST, MAX_COST) or 1
    if warm then
      local sample = math.min(math.max(run_s / cost, MIN_SPEED), MAX_SPEED)
      local ema = num_in(w[4], MIN_SPEED, MAX_SPEED)
      local n = tonumber(w[5]) or 0
      if n > 0 and ema then
        ema = alpha * sample + (1 - alpha) * ema
      else
        ema = sample
      end
      update[#update + 1], update[#update + 2] = 'ema:' .. app, num(ema)
      update[#update + 1], update[#update + 2] = 'n:' .. app, n + 1
      if redis.call('ZSCORE', ctx.alive, wid) then
        redis.call('ZADD', fleet_key, num(ema), wid)
      end
    else
      update[#update + 1], update[#update + 2] = 'cold:' .. app, num(run_s)
    end
    if redis.call('SCARD', held_key) == 0 then
      update[#update + 1], update[#update + 2] = 'state', 'idle'
      update[#update + 1], update[#update + 2] = 'busy_until_ms', int(now)
    end
    redis.call('HSET', worker_key, unpack(update))
  end

  emit(ctx, 'completed', 'job', job_id, 'task', index, 'worker', wid, 'lease_gen', gen,
    'run_s', num(run_s), 'warm', warm and '1' or '0', 'result', result_key)
  local finished = finish_job_with(ctx, job_key, job_id, now, { j[3], done_n, j[5], j[6], j[1], j[7] })
  return { 0, finished }
end
