--[[ accept_candidate: the verifier agreed: the task is done with the candidate's result (its
  key, run time and provenance; an inline one moves to field data), as the candidate's
  worker and lease made it (worker, name, backend, host, lease_gen and attempt id: the
  result key is the task's own lease's, as readers check; gen_top keeps the verifier's
  higher lease_gen for the next claim), verified_by the verifier (and its name,
  verified_by_name); the verifier's
  own result is not used. The verifier's lease ends as a commit's does (write_commit).
  Returns the commit as written (commit_argv's fields), for the completed event.
]]
--- @include "write_commit"
local function accept_candidate(ctx, K, tid, j, c, cand, now)
  local inline = redis.call('HGET', ctx.prefix .. 'inline:' .. tid, 'cand') or ''
  local w = {
    prefix = c.prefix, tid = tid, wid = cand[CAND_TASK.cand_wid] or '',
    gen = cand[CAND_TASK.cand_gen] or c.gen,
    result_key = cand[CAND_TASK.cand], run_s = num_in(cand[CAND_TASK.cand_run_s], 0, MAX_RUN_S)
      or 0, warm = '1', provenance = cand[CAND_TASK.cand_meta] or '{}', inline = inline,
  }
  local by_name = redis.call('HGET', K.task, 'worker_name') or '' -- the verifier's, until now
  write_commit(ctx, K, tid, j, w, now)
  redis.call('HSET', K.task, 'worker', w.wid, 'worker_name', cand[CAND_TASK.cand_name] or '',
    'backend', cand[CAND_TASK.cand_backend] or '', 'host', cand[CAND_TASK.cand_host] or '',
    'lease_gen', w.gen, 'attempt_id', cand[CAND_TASK.cand_attempt] or '',
    'verified_by', c.wid, 'verified_by_name', by_name)
  return w
end
