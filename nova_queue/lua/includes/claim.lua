--[[ claim: the body of claim-12 as a function, so that complete_claim-15 can run it
  after a commit. K and A are claim-12's KEYS and ARGV (see its header for the contract
  and the policy); returns claim-12's reply. check_claim_args(A) validates A without
  reading or writing anything (complete_claim-15 calls it before its commit).
]]
local function check_claim_args(A)
  -- the worker id needs no pattern: only a registered worker (register checks it) claims
  if #A < 9 or #A[2] > 128 or #A[3] > 64 then
    return 'invalid worker id or app name'
  end
  local k = int_in(A[4], 1, MAX_CLAIM_K)
  if not k or not int_in(A[5], 1, MAX_TTL_MS) or not int_in(A[6], 0, MAX_TTL_MS)
      or not int_in(A[7], 1, MAX_EVENTS_MAXLEN) or not int_in(A[8], 0, MAX_REAP) then
    return 'k (1..' .. MAX_CLAIM_K .. '), lease TTL, gap, events MAXLEN or reap limit out of range'
  end
  local ids = #A - 8
  if ids < k or ids > MAX_CLAIM_K then
    return 'a claim of k tasks needs k to ' .. MAX_CLAIM_K .. ' attempt ids'
  end
  for i = 9, 8 + ids do
    if not is_attempt_id(A[i]) then
      return 'invalid attempt id'
    end
  end
  return nil
end

-- The held set's members, at most MAX_HELD_VISIT of them (a worker holds at most a few;
-- the set is writable, so its size is not trusted).
local function held_members(held_key)
  if redis.call('SCARD', held_key) <= MAX_HELD_VISIT then
    return redis.call('SMEMBERS', held_key)
  end
  return redis.call('SRANDMEMBER', held_key, MAX_HELD_VISIT)
end

-- A pending task a claim meets but must not lease: its job was cancelled (the task is
-- cancelled), or its input was written by hand past enqueue's limit (the task fails).
-- j = the job's cached {state, params, pending, leased}; its pending count is kept current.
local function drop(ctx, pending_key, now, tid, task_key, job_id, j)
  local job_key = ctx.prefix .. 'job:' .. job_id
  redis.call('ZREM', pending_key, tid)
  if j[1] == 'cancelled' then
    redis.call('HSET', task_key, 'state', 'cancelled')
    redis.call('HINCRBY', job_key, 'cancelled', 1)
  else
    redis.call('HSET', task_key, 'state', 'failed', 'input', '', 'error_kind', 'error',
      'error', 'input longer than ' .. MAX_INPUT_BYTES .. ' bytes')
    redis.call('ZADD', ctx.failed, now, tid)
    redis.call('HINCRBY', job_key, 'failed', 1)
  end
  redis.call('HINCRBY', job_key, 'pending', -1)
  j[3] = (tonumber(j[3]) or 0) - 1 -- the counts written below for this job's leases
  finish_job_if_done(ctx, job_key, job_id, now)
end

local function claim_tasks(K, A)
  local pending_key, worker_key, held_key, fleet_key = K[1], K[2], K[3], K[4]
  local app_workers_key, leases_key, alive_key = K[5], K[6], K[7]
  local prefix, wid, app = A[1], A[2], A[3]
  local k, ttl_ms = tonumber(A[4]), tonumber(A[5])
  local ctx = {
    prefix = prefix, leases = leases_key, alive = alive_key, inflight = K[8],
    failed = K[9], finished = K[10], meta = K[11], events = K[12], maxlen = A[7],
    budget = MAX_RELEASES,
  }
  local now = now_ms()
  local grace = tick(ctx, now, tonumber(A[6]), ttl_ms)
  reap(ctx, now, grace, tonumber(A[8]))

  if not redis.call('ZSCORE', alive_key, wid) then
    return { -10, int(now), 'worker ' .. wid .. ' is not registered' }
  end

  -- everything this script reads of the worker, in one call
  local wh = redis.call('HMGET', worker_key, 'last_claim', 'ema:' .. app, 'n:' .. app,
    'bench:' .. app, 'name', 'backend', 'host', 'claims')

  -- a retried claim whose reply was lost gets the same leases back, not new ones
  if wh[1] == A[9] then
    local wanted = {}
    for i = 9, #A do
      wanted[A[i]] = true
    end
    local again = {}
    for _, tid in ipairs(held_members(held_key)) do
      local t = redis.call('HMGET', prefix .. 'task:' .. tid, 'state', 'attempt_id', 'lease_gen',
        'attempt_count', 'input', 'cost', 'deadline_ms', 'predicted_s')
      if t[1] == 'leased' and wanted[t[2]] then
        again[#again + 1] = {
          tid = tid, job = job_of(tid), index = tonumber(index_of(tid)), input = t[5],
          cost = num_in(t[6], MIN_COST, MAX_COST) or 1, params = redis.call('HGET', prefix .. 'job:' .. job_of(tid), 'params') or '{}',
          lease_gen = tonumber(t[3]), attempt_id = t[2], attempt = tonumber(t[4]),
          deadline_ms = t[7], predicted_s = tonumber(t[8]) or cjson.null,
        }
      end
    end
    if #again > 0 then
      return { 0, int(now), cjson.encode(again) }
    end
  end

  local R = redis.call('ZCARD', pending_key)
  if R == 0 then
    local inflight = tonumber(redis.call('HGET', ctx.inflight, app) or '0') or 0
    if inflight > 0 then
      return { 2, int(now), 500 }
    end
    return { 3, int(now), 1000 }
  end

  -- this worker's estimate (seconds per cost unit) and whether it is a measured one
  local function estimate()
    local ema = num_in(wh[2], MIN_SPEED, MAX_SPEED)
    if (tonumber(wh[3]) or 0) > 0 and ema then
      return ema, true
    end
    local bench = num_in(wh[4], MIN_SPEED, MAX_SPEED)
    if not bench then
      return nil, false
    end
    local ratios = {}
    local members = redis.call('ZRANGE', fleet_key, 0, 63)
    for _, v in ipairs(members) do
      if v ~= wid then
        local h = redis.call('HMGET', prefix .. 'worker:' .. v, 'ema:' .. app, 'n:' .. app, 'bench:' .. app)
        local ema, b = num_in(h[1], MIN_SPEED, MAX_SPEED), num_in(h[3], MIN_SPEED, MAX_SPEED)
        if (tonumber(h[2]) or 0) > 0 and ema and b then
          ratios[#ratios + 1] = ema / b
        end
      end
    end
    if #ratios == 0 then
      return bench, false
    end
    table.sort(ratios)
    return bench * ratios[math.floor((#ratios + 1) / 2)], false
  end

  -- candidate tasks in queue order, skipping cancelled jobs and tasks this worker ran
  -- out of memory on (while another live worker of the app has not); reads k entries
  -- first, 32 more only when some were skipped. Members that are not pending tasks
  -- (written by hand) are dropped from the set.
  local candidates, tasks, jobs = {}, {}, {}
  local live_workers = nil
  local removed = 0 -- members dropped from the set by this scan

  local offset, window = 0, k
  for round = 1, 2 do -- k entries, then 32 more: never more, whatever the set holds
    local scan = redis.call('ZRANGE', pending_key, offset, offset + window - 1)
    for _, tid in ipairs(scan) do
      if #candidates >= k then
        break
      end
      repeat -- one member; `break` goes on to the next
        local task_key = prefix .. 'task:' .. tid
        local job_id = #tid <= 80 and job_of(tid) -- nil: not a task id
        local t = job_id and redis.call('HMGET', task_key, 'cost', 'oom', 'input', 'lease_gen',
          'attempt_count', 'state')
        if not t or t[6] ~= 'pending' then
          redis.call('ZREM', pending_key, tid)
          removed = removed + 1
          break
        end
        local j = jobs[job_id]
        if not j then
          j = redis.call('HMGET', prefix .. 'job:' .. job_id, 'state', 'params', 'pending', 'leased')
          jobs[job_id] = j
        end
        if j[1] == 'staging' then
          break -- being published (enqueue-8 moves a large job in chunks): not yet claimable
        end
        if j[1] == 'cancelled' or #(t[3] or '') > MAX_INPUT_BYTES then
          drop(ctx, pending_key, now, tid, task_key, job_id, j)
          removed = removed + 1
          break
        end
        local oom = t[2] and string.sub(t[2], 1, MAX_OOM_BYTES)
        if oom and string.find(',' .. oom .. ',', ',' .. wid .. ',', 1, true) then
          live_workers = live_workers or redis.call('SCARD', app_workers_key)
          if select(2, string.gsub(oom, '[^,]+', '')) < live_workers then
            break
          end
        end
        candidates[#candidates + 1] = tid
        tasks[#tasks + 1] = t
      until true
    end
    if #candidates >= k or #scan < window then
      break
    end
    offset, window = offset + window - removed, 32
  end
  if #candidates == 0 then
    return { 2, int(now), 1000 }
  end
  if removed > 0 then
    R = redis.call('ZCARD', pending_key)
  end
  local costs = {}
  for i, t in ipairs(tasks) do
    costs[i] = num_in(t[1], MIN_COST, MAX_COST) or 1
  end

  local t_w, measured = estimate()
  local grant = 0
  if not t_w then
    grant = 1 -- explore: no data at all
  else
    if not measured then
      -- a measured estimate is already the fleet score (complete keeps it there)
      redis.call('ZADD', fleet_key, 'XX', num(t_w), wid)
    end
    local c = costs[1]
    local kk = #candidates
    local C = 0
    for i = 1, kk do
      C = C + costs[i]
    end
    local N = redis.call('ZCARD', fleet_key)
    local best = redis.call('ZRANGE', fleet_key, 0, 0, 'WITHSCORES')
    local t_min = math.max(tonumber(best[2] or t_w) or t_w, 1e-9)
    if N == 0 or N * t_w * C / (t_min * c) < R - kk + 1 then
      grant = kk -- fast path: the others cannot possibly finish the queue first
    else
      local others = {}
      -- the fastest MAX_FLEET_VISIT others: they finish the most tasks before w would
      local members = redis.call('ZRANGE', fleet_key, 0, MAX_FLEET_VISIT, 'WITHSCORES')
      for i = 1, #members, 2 do
        local v = members[i]
        if v ~= wid and #others < MAX_FLEET_VISIT then
          local b = num_in(redis.call('HGET', prefix .. 'worker:' .. v, 'busy_until_ms'), 0, 1e15) or 0
          -- {ms per task, ms until free}: offsets from now keep the arithmetic exact
          others[#others + 1] = { math.max(tonumber(members[i + 1]), 1e-9) * c * 1000, math.max(b - now, 0) }
        end
      end
      C = 0
      for m = 1, kk do
        C = C + costs[m]
        local finish = t_w * C * 1000 -- ms from now
        local s = 0
        for _, o in ipairs(others) do
          local x = (finish - o[2]) / o[1]
          if x > 0 then
            s = s + math.ceil(x - 1e-9) - 1 -- tasks v finishes strictly before w would
          end
        end
        if s < R - m + 1 then
          grant = m
        else
          break
        end
      end
      if grant == 0 then
        -- ask again when the answer can change: when another worker frees up — a busy one
        -- at its predicted free time, an idle one after the task it is about to take
        local hint = 1000
        for _, o in ipairs(others) do
          local next_ms = o[2] > 0 and o[2] or o[1]
          if next_ms < hint then
            hint = next_ms
          end
        end
        return { 2, int(now), int(math.max(hint, 50)) }
      end
    end
  end

  -- lease the granted tasks
  local deadline = now + ttl_ms
  local leases = {}
  local busy = 0
  local granted, job_order = {}, {} -- leases per job, written to its counts once below
  for i = 1, grant do
    local tid = candidates[i]
    local t = tasks[i]
    local task_key = prefix .. 'task:' .. tid
    local job_id = job_of(tid)
    local j = jobs[job_id]
    local gen = (int_in(t[4], 0, 1e15) or 0) + 1
    local attempt = (int_in(t[5], 0, 1e15) or 0) + 1
    local attempt_id = A[8 + i]
    local predicted = t_w and (t_w * costs[i]) or nil
    busy = busy + (predicted or 0)
    redis.call('ZREM', pending_key, tid)
    redis.call('HSET', task_key, 'state', 'leased', 'lease_gen', gen, 'attempt_count', attempt,
      'worker', wid, 'worker_name', wh[5] or '', 'backend', wh[6] or '', 'host', wh[7] or '',
      'attempt_id', attempt_id, 'deadline_ms', int(deadline), 'claimed_ms', int(now),
      'predicted_s', predicted and num(predicted) or '')
    redis.call('ZADD', leases_key, deadline, tid)
    redis.call('SADD', held_key, tid)
    if not granted[job_id] then
      granted[job_id] = 0
      job_order[#job_order + 1] = job_id
    end
    granted[job_id] = granted[job_id] + 1
    leases[i] = {
      tid = tid, job = job_id, index = tonumber(index_of(tid)), input = t[3], cost = costs[i],
      params = j[2] or '{}', lease_gen = gen, attempt_id = attempt_id, attempt = attempt,
      deadline_ms = int(deadline), predicted_s = predicted or cjson.null,
    }
    emit(ctx, 'claimed', 'job', job_id, 'task', index_of(tid), 'worker', wid, 'name', wh[5] or '',
      'backend', wh[6] or '', 'lease_gen', gen, 'attempt', attempt,
      'predicted_s', predicted and num(predicted) or '')
  end
  -- the jobs' counts (read with the candidates; a job being leased from is not cancelled,
  -- so nothing above changed them)
  for _, job_id in ipairs(job_order) do
    local j, n = jobs[job_id], granted[job_id]
    local counts = { 'pending', int((tonumber(j[3]) or 0) - n), 'leased', int((tonumber(j[4]) or 0) + n) }
    if j[1] == 'queued' then
      counts[5], counts[6], counts[7], counts[8] = 'state', 'running', 'started_ms', int(now)
    end
    redis.call('HSET', prefix .. 'job:' .. job_id, unpack(counts))
  end
  redis.call('HINCRBY', ctx.inflight, app, grant)
  redis.call('HSET', worker_key, 'state', 'busy', 'busy_until_ms', int(now + busy * 1000),
    'last_claim', A[9], 'claims', (tonumber(wh[8]) or 0) + grant)
  return { 0, int(now), cjson.encode(leases) }
end
