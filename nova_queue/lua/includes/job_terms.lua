--[[ job_terms: a new job's terms from its fields f (job_fields' decoded JSON): deadline_ms
  (epoch ms, after `now` and at most MAX_DEADLINE_MS later) and budget (dollars,
  0..MAX_BUDGET), each as the string create_job writes ('' for none), or nil and what is
  wrong. create_job writes them last: a field ahead of the others would lengthen every
  read of those (a commit's among them).
]]
--- @include "common"
local function job_terms(f, now)
  local deadline = f.deadline_ms and int_in(f.deadline_ms, now + 1, now + MAX_DEADLINE_MS)
  if f.deadline_ms and not deadline then
    return nil, nil, 'deadline_ms must be a time (epoch ms) after now and at most '
      .. MAX_DEADLINE_MS / 86400000 .. ' days ahead'
  end
  local budget = f.budget and num_in(f.budget, 0, MAX_BUDGET)
  if f.budget and not budget then
    return nil, nil, 'budget must be a number of dollars from 0 to ' .. MAX_BUDGET
  end
  return deadline and int(deadline) or '', budget and num(budget) or ''
end
