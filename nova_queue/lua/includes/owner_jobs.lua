--[[ owner_jobs: fair share between owners, when two or more have jobs of the app with
  pending work (app:<app>:owners): candidates come from the owners in fair-share order
  (owner_order's ranks, the lowest first: next_owner), each owner's jobs in their queue
  order (priority, then FIFO; queue_job), the first 8 per owner, until the claim has k. A
  job whose range holds no pending task leaves its owner's queue, and an owner whose queue
  is empty leaves the set (a requeued task puts them back). Looks at 32 owners at most
  (members_upto: all of them when there are no more). Returns false when fewer than two
  owners wait (the caller walks the queue as one), else true (s holds what it found).
]]
--- @include "members_upto"
--- @include "owner_order"
--- @include "next_owner"
--- @include "consider_job"
--- @include "prefer_model"
--- @include "take_jobs"
local function owner_jobs(ctx, K, a, me, s, now)
  local owners_key = ctx.prefix .. 'app:' .. a.app .. ':owners'
  local owners = members_upto(owners_key, 32) -- all of them, up to 32
  if #owners < 2 then
    return false
  end
  s.fair = true -- write_leases charges the owners for what they get now
  local rank, done = owner_order(ctx.prefix, owners, now, s), {}
  for _ = 1, #owners do
    local o = next_owner(owners, rank, done)
    local owner = owners[o]
    done[o] = true
    local queue = ctx.prefix .. 'app:' .. a.app .. ':owner:' .. owner
    local jobs, models = {}, false
    for i, job_id in ipairs(redis.call('ZRANGE', queue, '0', '7')) do
      if i > 1 and not models then -- the rest are read only when models matter
        jobs[#jobs + 1] = job_id -- (checked and read by take_jobs, if it gets there)
      elseif not is_job_id(job_id) then
        redis.call('ZREM', queue, job_id)
      else
        local model = consider_job(ctx, s, job_id)[CLAIM_JOB.model]
        jobs[#jobs + 1] = job_id
        models = models or (i == 1 and model and model ~= '')
      end
    end
    if models then
      jobs = prefer_model(ctx.prefix, a.app, me, s, jobs)
    end
    -- all taken for now (a requeue puts a job back), or gone
    local empty = take_jobs(ctx, K, a, me, s, jobs, now)
    if #empty > 0 then
      redis.call('ZREM', queue, unpack(empty))
    end
    if #s.tids >= a.k then
      return true
    end
    if redis.call('ZCARD', queue) == 0 then
      redis.call('SREM', owners_key, owner)
    end
    if #s.tids > 0 then
      return true -- this owner's turn: the next claim weighs the owners again
    end
  end
  return true
end
