--[[ claimer: everything a claim reads of the claiming worker, in one call: `me` (its
  estimates for the app, name, backend, host, claim count, labels, device memory, warm
  model and load time, trust, and the models it could not prepare: cannot_run_here's
  marks, read only when it has the field), its last claim's first attempt id, whether it is
  quarantined and whether it verifies others' results.
]]
--- @include "cannot_run_here"
local function claimer(K, a, now)
  local last_claim, ema, n, bench, name, backend, host, claims, quarantined, labels,
    memory_total, warm, load_s, cannot_run, trust, verifier = unpack(redis.call('HMGET',
    K.worker, 'last_claim', 'ema:' .. a.app, 'n:' .. a.app, 'bench:' .. a.app, 'name',
    'backend', 'host', 'claims', 'quarantined', 'labels', 'memory_total', 'warm:' .. a.app,
    'load:' .. a.app, 'cannot_run', 'trust', 'verifier'))
  local me = { ema = ema, n = n, bench = bench, name = name or '', backend = backend or '',
    host = host or '', claims = claims, labels_raw = labels, memory = memory_total, warm = warm,
    load_s = num_in(load_s, 0, MAX_RUN_S) or 0, app = a.app, trust = trust,
    window_ms = math.max(a.ttl_ms, MIN_CLAIMING_MS), -- others count on recent claimers only
    -- the models it could not prepare: {model -> reason}, or nil
    marks = cannot_run and cannot_run_here(K.worker, cannot_run, a.app, now) }
  return me, last_claim, quarantined, verifier
end
