--[[ record_failure: what a failure report says about the task and its worker, before the
  attempt ends. "oom": the worker joins the task's oom list, and the task remembers the
  largest device memory (bytes) and the smallest batch it ran out of memory with
  (oom_fits sends it to more memory or a smaller batch); "error": the worker's identity
  (ident_of) joins its failed_on list (left_to_others sends it elsewhere, also when the same
  machine or token comes back under a new worker id). Every kind but "shutdown" and
  "prepare" (hand-backs) counts as a failure of the worker. t: fail-10's one read of the
  task, FAIL_TASK (the fence's LEASE, then what a failure weighs).
]]
--- @include "add_to_list"
local function record_failure(task_key, worker_key, t, wid, kind, batch)
  if kind == 'oom' then
    local memory = num_in(redis.call('HGET', worker_key, 'memory_total'), 0, 1e18) or 0
    redis.call('HSET', task_key, 'oom', add_to_list(t[FAIL_TASK.oom], wid), 'oom_memory',
      num(math.max(memory, num_in(t[FAIL_TASK.oom_memory], 0, 1e18) or 0)), 'oom_batch',
      math.min(batch, int_in(t[FAIL_TASK.oom_batch], 1, MAX_CLAIM_K) or batch))
    redis.call('HINCRBY', worker_key, 'oom', 1)
  elseif kind == 'error' then
    redis.call('HSET', task_key, 'failed_on', add_to_list(t[FAIL_TASK.failed_on], ident_of(wid)))
  end
  if kind ~= 'shutdown' and kind ~= 'prepare' then
    redis.call('HINCRBY', worker_key, 'failures', 1)
  end
end
