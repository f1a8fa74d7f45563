--[[ accept_candidate: the verifier agreed: the task is done with the candidate's result, as
  its worker and lease made it (candidate_commit; gen_top keeps the verifier's higher
  lease_gen for the next claim), verified_by the verifier (and its name, verified_by_name);
  the verifier's own result is not used. The verifier's lease ends as a commit's does (write_commit).
  Returns the commit as written (commit_argv's fields), for the completed event.
]]
--- @include "write_commit"
--- @include "candidate_commit"
local function accept_candidate(ctx, K, tid, j, c, cand, now)
  local w = candidate_commit(c.prefix, tid, cand)
  local by_name = redis.call('HGET', K.task, 'worker_name') or '' -- the verifier's, until now
  write_commit(ctx, K, tid, j, w, now)
  redis.call('HSET', K.task, 'verified_by', c.wid, 'verified_by_name', by_name, unpack(w.made))
  return w
end
