--[[ next_owner: the index of the owner fair share serves next among those not yet done: the
  lowest rank (owner_order), ties by name. A selection of the minimum, not a sort: a claim
  almost always takes the first owner's work.
]]
local function next_owner(owners, rank, done)
  local best
  for i = 1, #owners do
    if not done[i] and (not best or rank[i] < rank[best]
        or (rank[i] == rank[best] and owners[i] < owners[best])) then
      best = i
    end
  end
  return best
end
