--[[ write_candidate: a commit's result kept as the candidate `slot` of its task ('cand', or
  'cand2' for a second opinion that disagreed: `need` 'trusted' then), awaiting
  verification since now: with who made it (worker id, name, backend, host, owner: its
  hash's `owner`, a gateway token's, else its identity), its run time, when (ms), its
  provenance and its lease (lease_gen, attempt id: its result key's); a result sent inline
  waits in field `slot` of inline:<task>. c: commit_argv's fields.
]]
--- @include "common"
local function write_candidate(ctx, K, tid, c, now, slot, need)
  local name, backend, host, owner = unpack(redis.call('HMGET', K.worker, 'name', 'backend',
    'host', 'owner'))
  redis.call('HSET', K.task, slot, c.result_key, slot .. '_wid', c.wid,
    slot .. '_name', name or '', slot .. '_backend', backend or '', slot .. '_host', host or '',
    slot .. '_owner', owner or ident_of(c.wid),
    slot .. '_run_s', num(c.run_s), slot .. '_ms', int(now), slot .. '_meta', c.provenance,
    slot .. '_gen', c.gen, slot .. '_attempt', c.attempt_id, 'v_since_ms', int(now),
    'v_need', need)
  if c.inline ~= '' then
    redis.call('HSET', ctx.prefix .. 'inline:' .. tid, slot, c.inline)
  end
end
