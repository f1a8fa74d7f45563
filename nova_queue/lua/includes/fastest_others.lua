--[[ fastest_others: the MAX_FLEET_VISIT fastest other workers of the fleet (they finish the
  most tasks before the claiming worker would), as two lists in fleet order: task_ms (ms
  per task of cost c) and free_ms (ms until it is free; 0: idle): offsets from now keep the
  arithmetic exact. Counted on only while it works for the pool (still_claiming since
  `since`), so a worker that registers and never claims holds no one back. Not counted on:
  a worker whose last attempt failed (a failure streak: it may fail what it takes), one
  that `skip` lists (the head task ran out of memory on it, or failed on its identity: it
  leaves the task, unless the list is longer than MAX_LISTED: see left_to_others), one
  whose labels do not meet `requires` (the head task's job's requirements, if any), nor one
  with a live cannot_run mark for `app` and `model` (it could not prepare such a job:
  live_marks; a forged field can cost a decode of MAX_MARKS_BYTES, so at most
  MAX_MARKS_DECODED such fields are decoded per claim, and past that a field counts as no
  mark). One that does not hold `model` warm is free only after its measured load time
  (load:<app> s). Speed is earned: a worker without measured runs of the app (n:<app>)
  counts as no faster than the fastest measured one that is counted on, or the claiming
  worker's own measured estimate (`floor_s`, or nil), however fast its benchmark says.
  Third list: their worker ids (terms_grant reads their prices).
]]
--- @include "meets"
--- @include "decode_list"
--- @include "still_claiming"
--- @include "live_marks"
local function fastest_others(fleet_key, prefix, wid, c, now, since, skip, requires, model, app,
    floor_s)
  local task_ms, free_ms, unmeasured, ids = {}, {}, {}, {}
  local skipped, n, decodes = {}, 0, MAX_MARKS_DECODED
  for id in string.gmatch(skip or '', '[^,]+') do
    n = n + 1
    if n > MAX_LISTED then
      skipped = {}
      break
    end
    skipped[id] = true
  end
  -- only the fields this claim weighs (a field a hash lacks costs Redis a walk over it
  -- all): labels when the job has requirements, the warm model and load time when a model
  local fields = { 'busy_until_ms', 'fail_streak', 'claim_ms', 'n:' .. app, 'cannot_run' }
  if requires then
    fields[#fields + 1] = 'labels'
  end
  if model then
    fields[#fields + 1], fields[#fields + 2] = 'warm:' .. app, 'load:' .. app
  end
  local members = redis.call('ZRANGE', fleet_key, 0, MAX_FLEET_VISIT, 'WITHSCORES')
  for i = 1, #members, 2 do
    local v = members[i]
    if v ~= wid and #task_ms < MAX_FLEET_VISIT and not skipped[v] and not skipped[ident_of(v)] then
      local busy_until_ms, fail_streak, claim_ms, runs, cannot_run, labels, warm, load_s =
        unpack(redis.call('HMGET', prefix .. 'worker:' .. v, unpack(fields)))
      if not requires then -- no labels asked for: the model's fields came one place earlier
        labels, warm, load_s = nil, labels, warm
      end
      local active = still_claiming(prefix, v, claim_ms, busy_until_ms, since)
      local s_per_cost = math.max(tonumber(members[i + 1]), 1e-9)
      if active and (tonumber(runs) or 0) > 0 then
        floor_s = math.min(floor_s or s_per_cost, s_per_cost)
      end
      local able = active and (tonumber(fail_streak) or 0) == 0
        and (not requires or meets(decode_list(labels, {}), requires))
      if able and cannot_run and decodes > 0 then
        decodes = decodes - 1
        local _, of_app = live_marks(cannot_run, now, app)
        able = of_app[model or ''] == nil
      end
      if able then
        local k = #task_ms + 1
        free_ms[k] = math.max((num_in(busy_until_ms, 0, 1e15) or 0) - now, 0)
        if model and warm ~= model then
          free_ms[k] = free_ms[k] + (num_in(load_s, 0, MAX_RUN_S) or 0) * 1000
        end
        task_ms[k], unmeasured[k], ids[k] = s_per_cost * c * 1000, (tonumber(runs) or 0) <= 0, v
      end
    end
  end
  for k = 1, #task_ms do
    if unmeasured[k] and floor_s then
      task_ms[k] = math.max(task_ms[k], floor_s * c * 1000)
    end
  end
  return task_ms, free_ms, ids
end
