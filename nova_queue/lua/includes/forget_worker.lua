--[[ forget_worker: deletes what Redis keeps of a worker that left or was lost (its hash and
  held set, its entries in `workers` and `departed`), unless it joined again since (it is in
  `alive`: it only leaves `departed`). Its apps' worker sets and fleets lost it when it left.
  ctx fields used: prefix, workers, alive, departed, events, maxlen.
  Returns true if it was forgotten.
]]
--- @include "common"
local function forget_worker(ctx, wid)
  redis.call('ZREM', ctx.departed, wid)
  if not is_name(wid, 128) or redis.call('ZSCORE', ctx.alive, wid) then
    return false -- not a worker id (written by hand), or back in the fleet
  end
  redis.call('DEL', ctx.prefix .. 'worker:' .. wid, ctx.prefix .. 'held:' .. wid)
  redis.call('ZREM', ctx.workers, wid)
  emit(ctx, 'worker_forgotten', 'worker', wid)
  return true
end
