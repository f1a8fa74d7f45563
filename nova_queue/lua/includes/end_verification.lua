--[[ end_verification: a task's verification is over (its result stands, or a trusted one
  replaced it): the candidates' fields and inline copies go, and its job counts one fewer
  verifying task.
]]
--- @include "common"
local function end_verification(ctx, K, tid)
  local fields = { 'v_since_ms', 'v_need', 'v_tries' }
  for _, slot in ipairs({ 'cand', 'cand2' }) do
    for _, f in ipairs({ '', '_wid', '_name', '_backend', '_host', '_owner', '_run_s', '_ms',
      '_meta', '_gen', '_attempt' }) do
      fields[#fields + 1] = slot .. f
    end
  end
  redis.call('HDEL', K.task, unpack(fields))
  redis.call('HDEL', ctx.prefix .. 'inline:' .. tid, 'cand', 'cand2')
  redis.call('HINCRBY', K.job, 'verifying', -1)
end
