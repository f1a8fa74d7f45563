--[[ emit_claimed: the claimed events of one claim's leases as one entry of the stream. One
  lease: the plain claimed event. Two or more: claimed_many, with the fields every lease
  shares (worker, name, backend) written once and each other field a comma list in lease
  order, one value when all leases have the same (packed; nova_queue/events.py,
  PACKED_TYPES: readers get one claimed event per lease back). No value in a list can hold
  a comma: job ids, indexes, lease_gens, attempts and numbers follow their patterns.
  ev: the per-lease {job, task, gen, attempt, predicted} (tables of strings, same length).
]]
--- @include "common"
local function emit_claimed(ctx, ev, wid, me)
  local n = #ev.task
  if n == 1 then
    emit(ctx, 'claimed', 'job', ev.job[1], 'task', ev.task[1], 'worker', wid, 'name', me.name,
      'backend', me.backend, 'lease_gen', ev.gen[1], 'attempt', ev.attempt[1],
      'predicted_s', ev.predicted[1])
  elseif n > 1 then
    emit(ctx, 'claimed_many', 'worker', wid, 'name', me.name, 'backend', me.backend,
      'job', packed(ev.job), 'task', table.concat(ev.task, ','), 'lease_gen', packed(ev.gen),
      'attempt', packed(ev.attempt), 'predicted_s', packed(ev.predicted))
  end
end
