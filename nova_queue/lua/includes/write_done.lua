--[[ write_done: the one write of a committed task (complete_task's, through write_commit,
  and commit_fast's): done, with its result, when it finished (now_s, as int() writes
  now), its run time and whether it ran warm, and its provenance; a cold run's time also as
  cold_s (compile/warm-up, kept apart); a result sent inline (a non-empty c.inline) is held
  in the field `data` of the task's own hash `inline:<task id>` (a hash: the worker and
  gallery ACL roles write and read hashes, docs/SECURITY.md; the task hash stays text).
  Readers take it before the store; nothing re-opens a done task, so no earlier inline
  result can linger; purge_job deletes it with the task. c: commit_argv's fields. Returns
  the run time as written.
]]
--- @include "common"
local function write_done(task_key, c, now_s)
  local run_s = num(c.run_s)
  if c.warm == '1' then
    redis.call('HSET', task_key, 'state', 'done', 'result', c.result_key, 'finished_ms', now_s,
      'run_s', run_s, 'warm', '1', 'meta', c.provenance)
  else
    redis.call('HSET', task_key, 'state', 'done', 'result', c.result_key, 'finished_ms', now_s,
      'run_s', run_s, 'warm', '0', 'meta', c.provenance, 'cold_s', run_s)
  end
  if c.inline ~= '' then
    redis.call('HSET', c.prefix .. 'inline:' .. c.tid, 'data', c.inline)
  end
  return run_s
end
