--[[ job_eligible: whether the claiming worker may take tasks of a job: it is not being
  published (staging), the worker has no live cannot_run mark for its model (me.marks:
  claim_tasks reads them; '' for a job without one) and the worker's labels meet its
  requirements. j: the scan's CLAIM_JOB read (consider_job); me.labels is decoded once
  per claim.
]]
--- @include "meets"
--- @include "decode_list"
local function job_eligible(j, me)
  local requires = j[CLAIM_JOB.requires]
  if j[CLAIM_JOB.state] == 'staging' or (me.marks and me.marks[j[CLAIM_JOB.model] or '']) then
    return false
  end
  if not requires or requires == '' or requires == '[]' then
    return true
  end
  me.labels = me.labels or decode_list(me.labels_raw, {})
  return meets(me.labels, decode_list(requires, { {} }))
end
