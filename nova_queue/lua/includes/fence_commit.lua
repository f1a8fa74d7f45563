--[[ fence_commit: the one read of a reported task that a commit is fenced by (complete_task
  and commit_batch alike), and its answer: UNKNOWN_TASK, ALREADY (this exact commit already
  took effect: its reply was lost; the result is read only for a done task, the
  candidates only for a commit the fence refuses), or the
  fence's (OK and which attempt, or the stale code). c: commit_argv's fields. Declares the
  commit's layouts: COMMIT_TASK (what the commit weighs of its task) and COMMIT_JOB (of its
  job: the counts finish_job_with weighs first).
  Returns code, which, t (COMMIT_TASK).
]]
--- @include "fence"
local function fence_commit(task_key, c)
  local t = redis.call('HMGET', task_key, unpack(COMMIT_TASK))
  local state = t[COMMIT_TASK.state]
  if not state then
    return CODE.UNKNOWN_TASK, nil, t
  end
  if state == 'done' and t[COMMIT_TASK.worker] == c.wid and t[COMMIT_TASK.lease_gen] == c.gen
      and t[COMMIT_TASK.attempt_id] == c.attempt_id
      and redis.call('HGET', task_key, 'result') == c.result_key then
    return CODE.ALREADY, nil, t
  end
  local code, which = fence(task_key, t, c.wid, c.gen, c.attempt_id)
  if code ~= CODE.OK and (state == 'verifying' or state == 'leased') then
    local cand_wid, cand_gen, cand_attempt, cand2_wid, cand2_gen, cand2_attempt = unpack(
      redis.call('HMGET', task_key, 'cand_wid', 'cand_gen', 'cand_attempt', 'cand2_wid',
        'cand2_gen', 'cand2_attempt'))
    if (cand_wid == c.wid and cand_gen == c.gen and cand_attempt == c.attempt_id)
        or (cand2_wid == c.wid and cand2_gen == c.gen and cand2_attempt == c.attempt_id) then
      return CODE.ALREADY, nil, t -- a held result's commit again: it took effect
    end
  end
  return code, which, t
end
