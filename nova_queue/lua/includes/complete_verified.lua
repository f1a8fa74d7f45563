--[[ complete_verified: the commit of a verifier (its lease of a task awaiting verification:
  cand, the task's CAND_TASK read) with what it says of the candidates (verdicts_of). A
  verifier the operator does not vouch for (trust 'new' or 'earned': an identity that earned
  trust by agreeing could then blame honest workers) that says nothing (it could not read or
  compare the candidates) gave no opinion: its lease ends as a verifier's failed run does
  (release: the result awaits verification again; MAX_VERIFY_TRIES such runs fail the
  task); one that agrees with the one candidate: the result
  stands (credit_ident); disagrees: its result becomes the second
  candidate and a trusted worker gives the third opinion (hold_for_verify 'cand2',
  'trusted'). A trusted word settles every candidate: agreement credits its maker, a
  mismatch catches it (catch_ident: quarantine, trust reset, its unverified results re-run);
  the task is done with the first candidate's result if the verifier agreed with it
  (accept_candidate), else with the verifier's own. Returns complete-11's reply.
]]
--- @include "verdicts_of"
--- @include "release"
--- @include "hold_for_verify"
--- @include "accept_candidate"
--- @include "credit_ident"
--- @include "catch_ident"
--- @include "end_verification"
--- @include "write_commit"
--- @include "record_runs"
--- @include "note_usage"
local function complete_verified(ctx, K, tid, j, c, t, trust, now)
  local v, app = verdicts_of(c.provenance), j[COMMIT_JOB.app]
  if trust and not v.cand and not v.cand2 then
    release(ctx, tid, now, 'no_verdict', 'the verifier could not compare the result', true)
    return { CODE.OK, 0 }
  end
  local cand = redis.call('HMGET', K.task, unpack(CAND_TASK))
  redis.call('HINCRBY', K.worker, 'verifies', -1)
  local held = trust and not cand[CAND_TASK.cand2] and v.cand ~= 'agree'
  local w = c
  if held then
    hold_for_verify(ctx, K, tid, j, c, now, 'cand2', 'trusted')
  else
    if v.cand == 'agree' then
      w = accept_candidate(ctx, K, tid, j, c, cand, now)
    else
      write_commit(ctx, K, tid, j, c, now)
    end
    end_verification(ctx, K, tid)
    local makers = { { 'cand', cand[CAND_TASK.cand_wid] }, { 'cand2', cand[CAND_TASK.cand2_wid] } }
    for _, m in ipairs(makers) do
      local slot, maker = unpack(m)
      if maker and v[slot] == 'agree' then
        credit_ident(ctx, maker, c.wid, tid, now)
      elseif maker and v[slot] == 'mismatch' and not trust then
        catch_ident(ctx, maker, c.wid, tid, now, c.cooldown_ms)
      end
    end
  end
  local cost = t[COMMIT_TASK.cost]
  record_runs(ctx, K, app, { { tid = tid, cost = cost, run_s = c.run_s, warm = c.warm == '1' } },
    now)
  note_usage(c.prefix, j[COMMIT_JOB.owner] or '',
    c.run_s - (num_in(t[COMMIT_TASK.charged], 0, MAX_RUN_S) or 0), now)
  if held then
    return { CODE.OK, 0 }
  end
  emit(ctx, 'completed', 'job', job_of(tid), 'task', index_of(tid), 'worker', w.wid,
    'lease_gen', w.gen, 'run_s', num(w.run_s), 'warm', '1', 'result', w.result_key)
  return { CODE.OK, finish_job_if_done(ctx, K.job, job_of(tid), now) }
end
