--[[ note_verifier: a registering worker's word on verifying its apps, kept in the meta hash
  as noverify:<app> (hold_unverified holds no result of such an app for verification; the
  result stands unverified). An app a vouched worker says its results do not compare
  (`nocompare`, a comma list: AppSpec.comparable False) is marked 'nocompare': its untrusted
  results are only validated; a vouched worker whose app compares lifts that mark. A
  verifier (`verifier`) lifts the other mark (noverify:<app> = since when none was live):
  the app's results may be held again. The word of a worker that is not vouched for
  changes no 'nocompare' mark.
]]
--- @include "in_list"
local function note_verifier(meta_key, apps, verifier, nocompare, vouched)
  if type(nocompare) ~= 'string' or #nocompare > MAX_TEXT_BYTES then
    nocompare = nil
  end
  for _, app in ipairs(apps) do
    local mark = redis.call('HGET', meta_key, 'noverify:' .. app)
    if vouched and nocompare and in_list(nocompare, app) then
      redis.call('HSET', meta_key, 'noverify:' .. app, 'nocompare')
    elseif mark and ((mark == 'nocompare' and vouched) or (mark ~= 'nocompare' and verifier)) then
      redis.call('HDEL', meta_key, 'noverify:' .. app)
    end
  end
end
