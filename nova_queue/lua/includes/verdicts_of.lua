--[[ verdicts_of: what a verifier's provenance (a JSON object, checked by
  check_commit_report) says of the candidates it compared its result with: its field
  `verify`, {cand = 'agree' | 'mismatch', cand2 = ...}. Anything else says nothing (nil):
  a verifier that did not compare neither credits nor blames.
]]
--- @include "common"
local function verdicts_of(provenance)
  local ok, meta = pcall(cjson.decode, provenance or '')
  local v = ok and type(meta) == 'table' and meta.verify
  local out = {}
  if type(v) == 'table' then
    for _, slot in ipairs({ 'cand', 'cand2' }) do
      if v[slot] == 'agree' or v[slot] == 'mismatch' then
        out[slot] = v[slot]
      end
    end
  end
  return out
end
