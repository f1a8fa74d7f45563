--[[ checks: what the scripts outside the hot path (claim, complete) check of their KEYS and
  ids; kept out of common so that claim and complete do not define them on every call.
]]
--- @include "common"
-- A lease_gen as the scripts write it: a decimal integer without leading zeros.
local function is_gen(s)
  return type(s) == 'string' and #s <= 15 and (s == '0' or string.match(s, '^[1-9]%d*$') ~= nil)
end

-- The keys a script received are exactly those nova_queue/keys.py builds for its ARGV:
-- K[i] == prefix .. names[i] (names[i] = false skips a key checked later), and the prefix
-- is a namespace's ("nova:{<ns>}:"), so keys built from it stay in that namespace.
local function keys_are(prefix, K, names)
  if type(prefix) ~= 'string' or #prefix > 72
      or not string.match(prefix, '^nova:{[A-Za-z0-9_.%-]+}:$') then
    return false
  end
  for i, name in ipairs(names) do
    if name and K[i] ~= prefix .. name then
      return false
    end
  end
  return true
end
