--[[ may_verify: whether one of the live verifiers `vs` (live_verifiers; nil: too many to
  look at, one is assumed) may verify a result of `makers` (a list of {ident, owner}, the
  candidates' makers): one of none of their identities that is vouched for, or of none of
  their owners either (take_verify's rule); and whether a vouched one may (a trusted word).
]]
local function may_verify(vs, makers)
  if not vs then
    return true, true
  end
  local any, vouched = false, false
  for _, v in ipairs(vs) do
    local other, other_owner = true, true
    for _, m in ipairs(makers) do
      other = other and v.ident ~= m.ident
      other_owner = other_owner and v.owner ~= m.owner
    end
    any = any or (other and (v.vouched or other_owner))
    vouched = vouched or (other and v.vouched)
  end
  return any, vouched
end
