-- expect: error reductions_limit
-- limits: {"max_reductions": 1000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: a plain find of 14,000 a's and a b in 28,000 a's compares about 14,000 bytes at each of 14,000 places (200 MB per call, one instruction); the bytes a search compares are charged, one reduction per 64, so the first call spends the budget (the neighbour, finds in a text, runs: test_charges.py)
local s = string.rep("a", 28000)
local p = string.rep("a", 14000) .. "b"
while true do local i = s:find(p, 1, true) end
