--[[ record_failure: what a failure report says about the task and its worker, before the
  attempt ends. "oom": the worker joins the task's oom list, and the task remembers the
  largest device memory (bytes) and the smallest batch it ran out of memory with
  (oom_fits sends it to more memory or a smaller batch); "error": the worker's identity
  (ident_of) joins its failed_on list (left_to_others sends it elsewhere, also when the same
  machine or token comes back under a new worker id). Every kind but "shutdown" and
  "prepare" (hand-backs) counts as a failure of the worker. t: fail-10's read of the task
  (t[8] oom, t[9] failed_on, t[12] oom_memory, t[13] oom_batch).
]]
--- @include "add_to_list"
local function record_failure(task_key, worker_key, t, wid, kind, batch)
  if kind == 'oom' then
    local memory = num_in(redis.call('HGET', worker_key, 'memory_total'), 0, 1e18) or 0
    redis.call('HSET', task_key, 'oom', add_to_list(t[8], wid), 'oom_memory',
      num(math.max(memory, num_in(t[12], 0, 1e18) or 0)), 'oom_batch',
      math.min(batch, int_in(t[13], 1, MAX_CLAIM_K) or batch))
    redis.call('HINCRBY', worker_key, 'oom', 1)
  elseif kind == 'error' then
    redis.call('HSET', task_key, 'failed_on', add_to_list(t[9], ident_of(wid)))
  end
  if kind ~= 'shutdown' and kind ~= 'prepare' then
    redis.call('HINCRBY', worker_key, 'failures', 1)
  end
end
