--[[ drop_member: doctor's repair of a set member that names no task in that place: a
  pending set's (kind 'pending', name: the app), the lease set's ('leases'), the failed set's
  ('failed') member that is not an existing task's id (an existing task is placed by
  place_task instead), or a held set's ('held', name: the worker) member that the worker
  does not lease (neither its worker nor its backup attempt's b_worker). Checked here,
  atomically. fix = false only says what it would do. ctx fields used: prefix, leases,
  failed. Returns 'dropped' or ''.
]]
--- @include "common"
local function drop_member(ctx, kind, name, member, fix)
  local state, worker, b_worker = unpack(is_task_id(member) and redis.call('HMGET',
    ctx.prefix .. 'task:' .. member, 'state', 'worker', 'b_worker') or {})
  local key
  if kind == 'held' then
    if state == 'leased' and (worker == name or b_worker == name) then
      return ''
    end
    key = ctx.prefix .. 'held:' .. name
  else
    if state then
      return ''
    end
    key = kind == 'pending' and (ctx.prefix .. 'pending:' .. name)
      or (kind == 'leases' and ctx.leases) or ctx.failed
  end
  local present = kind == 'held' and redis.call('SISMEMBER', key, member) == 1
    or kind ~= 'held' and redis.call('ZSCORE', key, member)
  if not present then
    return ''
  end
  if fix then
    redis.call(kind == 'held' and 'SREM' or 'ZREM', key, member)
  end
  return 'dropped'
end
