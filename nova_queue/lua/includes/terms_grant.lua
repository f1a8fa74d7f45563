--[[ terms_grant: grant_count for a head candidate whose job has terms (a deadline, a
  budget: nova_queue/terms.py). Only that job's candidates are weighed. With a deadline,
  deadline_grant against the fastest_others that may take it, with their prices (the
  worker's own: its `price`; the plan keeps DEADLINE_SLACK of the time left in hand); a
  job the live pool cannot finish in time is granted as for the fastest finish
  (grant_count) and says so once (event deadline_behind). A job with a budget and no plan
  for its deadline (none, or out of reach) takes what the claim offers: the fastest finish
  would count on workers its budget may hold back. With a budget, a priced worker
  gets only what keeps the job's spend (its field `spent`: price x predicted time, charged
  at each claim here) within it (budget_grant). Returns grant_count's {grant, hint}.
]]
--- @include "grant_count"
--- @include "deadline_grant"
--- @include "budget_grant"
local function terms_grant(ctx, K, a, t_w, measured, s, R, now, me)
  local job_key, j = ctx.prefix .. 'job:' .. s.job, s.jobs[s.job]
  local deadline = int_in(j[CLAIM_JOB.deadline_ms], 1, 1e15)
  local budget = num_in(j[CLAIM_JOB.budget], 0, MAX_BUDGET)
  local price = num_in(redis.call('HGET', K.worker, 'price'), 0, MAX_PRICE) or 0
  local costs = {}
  for i = 1, #s.tids do
    if job_of(s.tids[i]) ~= s.job then
      break
    end
    costs[i] = s.costs[i]
  end
  if not t_w then
    return 1 -- explore: no data at all
  end
  local sub = { costs = costs, tasks = s.tasks, jobs = s.jobs, job = s.job }
  local R_job = math.max(int_in(j[CLAIM_JOB.pending], 0, MAX_JOB_TASKS) or 0, #costs)
  local grant, hint = nil, WAIT_MS.MAX
  if deadline and deadline > now then
    if not measured then
      redis.call('ZADD', K.fleet, 'XX', num(t_w), a.wid)
    end
    local head = s.tasks[1]
    local oom, failed_on = head[CLAIM_TASK.oom], head[CLAIM_TASK.failed_on]
    local requires = decode_list(j[CLAIM_JOB.requires], nil)
    local model = j[CLAIM_JOB.model] ~= '' and j[CLAIM_JOB.model] or nil
    local task_ms, free_ms, ids = fastest_others(K.fleet, ctx.prefix, a.wid, costs[1], now,
      now - me.window_ms, (oom or failed_on) and ((oom or '') .. ',' .. (failed_on or '')),
      requires and #requires > 0 and requires or nil, model, me.app, measured and t_w or nil)
    local prices = {}
    for k = 1, #ids do
      prices[k] = num_in(redis.call('HGET', ctx.prefix .. 'worker:' .. ids[k], 'price'), 0,
        MAX_PRICE) or 0
    end
    grant = deadline_grant(task_ms, free_ms, prices, t_w, price, costs, R_job,
      (deadline - now) * (1 - DEADLINE_SLACK), model and me.warm ~= model and me.load_s * 1000 or 0)
  end
  if deadline and not grant and redis.call('HSETNX', job_key, 'behind_ms', int(now)) == 1 then
    emit(ctx, 'deadline_behind', 'job', s.job, 'worker', a.wid, 'deadline_ms', int(deadline))
  end
  if not grant and budget then
    grant = #costs -- the fastest finish would count on workers the budget may hold back
  elseif not grant then
    grant, hint = grant_count(K.fleet, ctx.prefix, a.wid, t_w, measured, sub, R, now, me)
  end
  if budget and grant > 0 and price > 0 then
    grant = budget_grant(ctx, job_key, s.job, a.wid, budget, price * t_w / 3600, costs, grant, now)
  end
  if grant > 0 and price > 0 then -- what a budget caps: price x predicted time, at the claim
    local C = 0
    for m = 1, grant do
      C = C + costs[m]
    end
    local spent = num_in(redis.call('HGET', job_key, 'spent'), 0, 1e15) or 0 -- HGET and HSET:
    redis.call('HSET', job_key, 'spent', num(spent + price * t_w * C / 3600)) -- the worker's
    -- ACL role has no HINCRBYFLOAT (docs/SECURITY.md)
  end
  return grant, grant == 0 and (hint or WAIT_MS.MAX) or nil
end
