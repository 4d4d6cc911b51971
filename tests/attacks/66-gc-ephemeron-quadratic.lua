-- expect: error timeout
-- limits: {"max_reductions": 100000000}
-- timeout_ms: 1500
-- max_wall_ms: 5000
-- why: collector work outside the hook: a long key->value chain in a weak-keyed table makes every atomic phase converge ephemerons one link per pass (quadratic, inside a single allocation); only the wall clock stops it
local t = setmetatable({}, {__mode = "k"})
local first = {}
local k = first
for i = 1, 200000 do
  local nk = {}
  t[k] = nk
  k = nk
end
local junk
for i = 1, 1e7 do junk = {i} end
return "escaped", first
