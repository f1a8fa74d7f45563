--[[ forget_worker: deletes what Redis keeps of a worker that left or was lost (its hash and
  held set, its entries in `workers` and `departed`, and `idents` while it is its identity's
  latest worker), unless it joined again since (it is in `alive`: it only leaves `departed`). Its apps' worker sets and fleets lost it when it left.
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
  if redis.call('HGET', ctx.prefix .. 'idents', ident_of(wid)) == wid then
    redis.call('HDEL', ctx.prefix .. 'idents', ident_of(wid)) -- its blame record goes with it
  end
  redis.call('ZREM', ctx.workers, wid)
  emit(ctx, 'worker_forgotten', 'worker', wid)
  return true
end
