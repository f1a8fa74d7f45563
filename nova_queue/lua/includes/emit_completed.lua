--[[ emit_completed: the completed events gathered in ev (the batch's commits so far, in
  order) as one entry of the stream, written now, before any other event of the call, so
  that the stream's order is that of single commits; ev is empty again. One commit: the
  plain completed event; two or more: completed_many (the worker once, each other field
  packed as emit_claimed packs them; result keys follow their pattern: no commas).
  ev: {job, task, gen, run_s, warm, result} (tables of strings, same length).
]]
--- @include "common"
local function emit_completed(ctx, ev, wid)
  local n = #ev.task
  if n == 1 then
    emit(ctx, 'completed', 'job', ev.job[1], 'task', ev.task[1], 'worker', wid,
      'lease_gen', ev.gen[1], 'run_s', ev.run_s[1], 'warm', ev.warm[1], 'result', ev.result[1])
  elseif n > 1 then
    emit(ctx, 'completed_many', 'worker', wid, 'job', packed(ev.job),
      'task', table.concat(ev.task, ','), 'lease_gen', packed(ev.gen), 'run_s', packed(ev.run_s),
      'warm', packed(ev.warm), 'result', table.concat(ev.result, ','))
  end
  if n > 0 then
    ev.job, ev.task, ev.gen, ev.run_s, ev.warm, ev.result = {}, {}, {}, {}, {}, {}
  end
end
