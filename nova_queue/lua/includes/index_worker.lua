--[[ index_worker: doctor's repair of a worker's index entries, checked atomically: a worker
  hash is in `workers` (scored by joined_ms), and one that left or was lost (not alive, with
  left_ms) is in `departed` (a release before retention did not put it there: it would
  never be forgotten). fix = false only says what it would do. ctx fields used: prefix,
  workers, alive, departed. Returns what it did ('' if nothing).
]]
--- @include "common"
local function index_worker(ctx, wid, now, fix)
  local id, joined_ms, left_ms = unpack(redis.call('HMGET', ctx.prefix .. 'worker:' .. wid, 'id',
    'joined_ms', 'left_ms'))
  if not id then
    return ''
  end
  local done = {}
  if not redis.call('ZSCORE', ctx.workers, wid) then
    done[#done + 1] = 'listed in workers'
    if fix then
      redis.call('ZADD', ctx.workers, int(int_in(joined_ms, 0, 1e15) or now), wid)
    end
  end
  if left_ms and not redis.call('ZSCORE', ctx.alive, wid)
      and not redis.call('ZSCORE', ctx.departed, wid) then
    done[#done + 1] = 'listed departed'
    if fix then
      redis.call('ZADD', ctx.departed, int(int_in(left_ms, 0, 1e15) or now), wid)
    end
  end
  return table.concat(done, ',')
end
