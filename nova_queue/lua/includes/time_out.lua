--[[ time_out: worker wid's attempt at task tid ran past its run deadline: the task is left
  to other workers (its identity joins failed_on), the attempt ends (release_attempt, kind 'timeout': an
  attempt is used, unless the worker is quarantined) and counts against the worker
  (note_failure). claimed_ms: when the attempt began. Returns the task's new state.
]]
--- @include "add_to_list"
--- @include "release_attempt"
--- @include "note_failure"
local function time_out(ctx, tid, wid, now, claimed_ms)
  local task_key = ctx.prefix .. 'task:' .. tid
  local failed_on, run_deadline_ms, b_worker, b_run_deadline_ms = unpack(redis.call('HMGET',
    task_key, 'failed_on', 'run_deadline_ms', 'b_worker', 'b_run_deadline_ms'))
  local limit = tonumber(b_worker == wid and b_run_deadline_ms or run_deadline_ms) or now
  local message = 'ran past its run-time limit of '
    .. num((limit - (int_in(claimed_ms, 0, 1e15) or now)) / 1000) .. ' s'
  redis.call('HSET', task_key, 'failed_on', add_to_list(failed_on, ident_of(wid)))
  local worker_key = ctx.prefix .. 'worker:' .. wid
  local quarantined = redis.call('HGET', worker_key, 'quarantined') == '1'
  if redis.call('EXISTS', worker_key) == 1 then
    redis.call('HINCRBY', worker_key, 'failures', 1)
  end
  local state = release_attempt(ctx, tid, wid, now, 'timeout', message, not quarantined)
  note_failure(ctx, wid, tid, nil, now, claimed_ms, message, nil)
  return state
end
