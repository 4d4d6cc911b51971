-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: an exponential pattern (40 optional items against 40 characters, about 2^40 steps) runs in one C call that the count hook never sees; every matcher step is charged as it goes, so max_reductions 1000 buys about a thousand steps, not hours (the neighbour, patterns that match, runs: test_charges.py)
local s = string.rep("a", 40)
return string.find(s, string.rep("a?", 40) .. string.rep("a", 40) .. "b")
