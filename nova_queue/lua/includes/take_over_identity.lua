--[[ take_over_identity: worker wid becomes the latest worker id of its identity (ident_of:
  a gateway token, a direct worker's node and name) in `idents`. When the identity's
  latest id was another one, wid takes over that worker's blame record, so a restart, a new
  gateway hello or a re-registration clears nothing: its quarantine (the same cool-down
  and probe), its failure streak (the tasks of it, for refunds) and its count of free
  hand-backs. Returns the previous worker id, or nil.
]]
--- @include "common"
local function take_over_identity(prefix, idents_key, worker_key, wid)
  local ident = ident_of(wid)
  local previous = redis.call('HGET', idents_key, ident)
  redis.call('HSET', idents_key, ident, wid)
  if not previous or previous == wid or not is_name(previous, 128) then
    return nil
  end
  local names = { 'quarantined', 'quarantine_reason', 'quarantined_ms', 'quarantine_until_ms',
    'cooldown_ms', 'probe_tid', 'fail_streak', 'fast_streak', 'streak_since_ms', 'streak_tids',
    'blamed', 'last_error', 'free_n', 'free_since_ms' }
  local values = redis.call('HMGET', prefix .. 'worker:' .. previous, unpack(names))
  local copy = {}
  for i, name in ipairs(names) do
    if values[i] then
      copy[#copy + 1], copy[#copy + 2] = name, values[i]
    end
  end
  if #copy > 0 then
    redis.call('HSET', worker_key, unpack(copy))
  end
  return previous
end
