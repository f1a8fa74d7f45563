--[[ prefer_model: the order in which a claim takes jobs of one priority whose tasks need a
  model loaded (a job's `model`): first a job whose model this worker has warm (loaded, or
  being loaded: its warm:<app>); then, for a worker that would have to load, the job whose
  model the fewest workers hold per pending task (app:<app>:warm counts them), so two jobs
  of different models submitted together spread over the pool instead of every worker
  loading each in turn. `jobs`: job ids in queue order, each read already (s.jobs: their
  CLAIM_JOB fields, consider_job); those of a lower priority than the first keep their place
  after. Returns the reordered list.
]]
--- @include "common"
local function prefer_model(prefix, app, me, s, jobs)
  local top, rest, models = {}, {}, {}
  local priority = s.jobs[jobs[1]][CLAIM_JOB.priority]
  for _, job_id in ipairs(jobs) do
    local j = s.jobs[job_id]
    local model = j[CLAIM_JOB.model]
    if j[CLAIM_JOB.priority] == priority and model and model ~= '' then
      top[#top + 1] = job_id
      models[#models + 1] = model
    else
      rest[#rest + 1] = job_id
    end
  end
  if #top < 2 and not (top[1] and models[1] == me.warm) then
    return jobs
  end
  local counts = redis.call('HMGET', prefix .. 'app:' .. app .. ':warm', unpack(models))
  local key, order = {}, {}
  for i, job_id in ipairs(top) do
    local j = s.jobs[job_id]
    local held = math.max(num_in(counts[i], 0, 1e6) or 0, 0)
    key[job_id] = models[i] == me.warm and -1
      or held / math.max(num_in(j[CLAIM_JOB.pending], 1, 1e9) or 1, 1)
    order[job_id] = i
  end
  table.sort(top, function(x, y)
    if key[x] ~= key[y] then
      return key[x] < key[y]
    end
    return order[x] < order[y]
  end)
  for _, job_id in ipairs(rest) do
    top[#top + 1] = job_id
  end
  return top
end
