--[[ prefer_model: the order in which a claim takes jobs of one priority whose tasks need a
  model loaded (a job's `model`): first a job whose model this worker has warm (loaded, or
  being loaded: its warm:<app>); then, for a worker that would have to load, the job whose
  model the fewest workers hold per pending task (app:<app>:warm counts them), so two jobs
  of different models submitted together spread over the pool instead of every worker
  loading each in turn. `jobs`: {job id, fields} pairs in queue order; those of a lower
  priority than the first keep their place after. Returns the reordered list.
]]
--- @include "common"
local function prefer_model(prefix, app, me, jobs)
  local top, rest, models = {}, {}, {}
  for _, p in ipairs(jobs) do
    if p[2][7] == jobs[1][2][7] and p[2][10] and p[2][10] ~= '' then
      top[#top + 1] = p
      models[#models + 1] = p[2][10]
    else
      rest[#rest + 1] = p
    end
  end
  if #top < 2 and not (top[1] and top[1][2][10] == me.warm) then
    return jobs
  end
  local counts = redis.call('HMGET', prefix .. 'app:' .. app .. ':warm', unpack(models))
  local key, order = {}, {}
  for i, p in ipairs(top) do
    local held = math.max(num_in(counts[i], 0, 1e6) or 0, 0)
    key[p[1]] = p[2][10] == me.warm and -1 or held / math.max(num_in(p[2][3], 1, 1e9) or 1, 1)
    order[p[1]] = i
  end
  table.sort(top, function(x, y)
    if key[x[1]] ~= key[y[1]] then
      return key[x[1]] < key[y[1]]
    end
    return order[x[1]] < order[y[1]]
  end)
  for _, p in ipairs(rest) do
    top[#top + 1] = p
  end
  return top
end
