--[[ sample_verify: whether the commit of a worker that is not trusted (`trust`: its worker
  hash's field, 'new' or 'earned'; complete_task never asks for a vouched worker, which has
  none) is held for verification. A new identity's share follows its record (trust:<ident>): every
  result at first, VERIFY_HALF / (VERIFY_HALF + agreements in a row) after, never below
  VERIFY_FLOOR; an identity that earned trust is sampled at VERIFY_FLOOR. The draw
  mixes Redis's microseconds with the commit's place in its call (i): the worker cannot
  tell which of its results will be checked.
]]
--- @include "common"
local function sample_verify(prefix, ident, trust, i)
  local rate = VERIFY_FLOOR
  if trust == 'new' then
    local streak = int_in(redis.call('HGET', prefix .. 'trust:' .. ident, 'streak'), 0, 1e15)
      or 0
    rate = math.max(VERIFY_FLOOR, VERIFY_HALF / (VERIFY_HALF + streak))
  end
  local micros = tonumber(redis.call('TIME')[2])
  local draw = ((micros * 1103515245 + i * 2654435761) % 2147483648) / 2147483648
  return draw < rate
end
