--[[ usage_phase: phi(now) of forward-decayed usage (note_usage): now_ms / half_ms + phase,
  from the usage hash's `half_life_s` (3600 when unset or out of range) and `phase` (0 when
  unset; shares.set_half_life moves it when the half-life changes, so phi stays continuous).
  An owner's usage now is 2^(F - phi(now)) for its field F = f:<owner>.
]]
--- @include "common"
local function usage_phase(half_life_s, phase, now)
  return now / ((num_in(half_life_s, 1, MAX_HALF_LIFE_S) or 3600) * 1000)
    + (num_in(phase, -1e12, 1e12) or 0)
end
