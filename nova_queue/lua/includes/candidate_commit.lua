--[[ candidate_commit: the first candidate of a task awaiting verification (cand: its
  CAND_TASK read) as the commit that makes it the task's result: commit_argv's fields
  (its result key, run time, provenance, lease_gen and an inline copy, moved to field data
  when written) and `made`, the HSET arguments that name the worker and lease that made it
  (worker, name, backend, host, lease_gen, attempt id: the result key is then the task's
  own lease's, as readers check). accept_candidate and stand_unverified write it.
]]
--- @include "common"
local function candidate_commit(prefix, tid, cand)
  local w = {
    prefix = prefix, tid = tid, wid = cand[CAND_TASK.cand_wid] or '',
    gen = cand[CAND_TASK.cand_gen] or '0', result_key = cand[CAND_TASK.cand],
    run_s = num_in(cand[CAND_TASK.cand_run_s], 0, MAX_RUN_S) or 0, warm = '1',
    provenance = cand[CAND_TASK.cand_meta] or '{}',
    inline = redis.call('HGET', prefix .. 'inline:' .. tid, 'cand') or '',
  }
  w.made = { 'worker', w.wid, 'worker_name', cand[CAND_TASK.cand_name] or '',
    'backend', cand[CAND_TASK.cand_backend] or '', 'host', cand[CAND_TASK.cand_host] or '',
    'lease_gen', w.gen, 'attempt_id', cand[CAND_TASK.cand_attempt] or '' }
  return w
end
