--[[ job_eligible: whether the claiming worker may take tasks of a job: it is not being
  published (staging), the worker has no live cannot_run mark for its model (me.marks:
  cannot_run_here; '' for a job without one) and the worker's labels meet its
  requirements. j: the scan's cached job fields (scan_candidates: j[6] is `requires`, j[10]
  `model`); me.labels is decoded once per claim.
]]
--- @include "meets"
--- @include "decode_list"
local function job_eligible(j, me)
  if j[1] == 'staging' or (me.marks and me.marks[j[10] or '']) then
    return false
  end
  if not j[6] or j[6] == '' or j[6] == '[]' then
    return true
  end
  me.labels = me.labels or decode_list(me.labels_raw, {})
  return meets(me.labels, decode_list(j[6], { {} }))
end
