--[[ fastest_others: the MAX_FLEET_VISIT fastest other workers of the fleet (they finish the
  most tasks before the claiming worker would), each as {ms per task of cost c, ms until
  it is free (0: idle)}: offsets from now keep the arithmetic exact. Counted on only while
  it works for the pool (still_claiming since `since`), so a worker that registers and
  never claims holds no one back. Not counted on: a worker whose last attempt failed (a
  failure streak: it may fail what it takes), one that `skip` lists (the head task ran out
  of memory on it, or failed on its identity: it leaves the task, unless the list is longer
  than MAX_LISTED: see left_to_others), one whose labels do not meet `requires` (the head
  task's job's requirements, if any), nor one with a live cannot_run mark for `app` and
  `model` (it could not prepare such a job: marked_for, which decodes at most
  MAX_MARKS_DECODED such fields per claim). One that does not hold `model` warm is free
  only after its measured load time (load:<app> s). Speed is earned: a worker without
  measured runs of the app (n:<app>) counts as no faster than the fastest measured one that
  is counted on, or the claiming worker's own measured estimate (`floor_s`, or nil),
  however fast its benchmark says.
]]
--- @include "meets"
--- @include "decode_list"
--- @include "still_claiming"
--- @include "marked_for"
local function fastest_others(fleet_key, prefix, wid, c, now, since, skip, requires, model, app,
    floor_s)
  local others, unmeasured, skipped, n, budget = {}, {}, {}, 0, { n = MAX_MARKS_DECODED }
  for id in string.gmatch(skip or '', '[^,]+') do
    n = n + 1
    if n > MAX_LISTED then
      skipped = {}
      break
    end
    skipped[id] = true
  end
  -- only the fields this claim weighs: a field a hash lacks costs Redis a walk over it all
  local fields = { 'busy_until_ms', 'fail_streak', 'claim_ms', 'n:' .. app, 'cannot_run',
    requires and 'labels' or nil }
  if model then
    fields[#fields + 1] = 'warm:' .. app
    fields[#fields + 1] = 'load:' .. app
  end
  local members = redis.call('ZRANGE', fleet_key, 0, MAX_FLEET_VISIT, 'WITHSCORES')
  for i = 1, #members, 2 do
    local v = members[i]
    if v ~= wid and #others < MAX_FLEET_VISIT and not skipped[v] and not skipped[ident_of(v)] then
      local h = redis.call('HMGET', prefix .. 'worker:' .. v, unpack(fields))
      local active = still_claiming(prefix, v, h[3], h[1], since)
      local s_per_cost = math.max(tonumber(members[i + 1]), 1e-9)
      if active and (tonumber(h[4]) or 0) > 0 then
        floor_s = math.min(floor_s or s_per_cost, s_per_cost)
      end
      local able = active and (tonumber(h[2]) or 0) == 0
        and (not requires or meets(decode_list(h[6], {}), requires))
        and not (h[5] and marked_for(h[5], app, model or '', now, budget))
      if able then
        local b = math.max((num_in(h[1], 0, 1e15) or 0) - now, 0)
        if model and h[#fields - 1] ~= model then
          b = b + (num_in(h[#fields], 0, MAX_RUN_S) or 0) * 1000
        end
        others[#others + 1] = { s_per_cost * c * 1000, b }
        unmeasured[#others] = (tonumber(h[4]) or 0) <= 0
      end
    end
  end
  for k, o in ipairs(others) do
    if unmeasured[k] and floor_s then
      o[1] = math.max(o[1], floor_s * c * 1000)
    end
  end
  return others
end
