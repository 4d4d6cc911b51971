-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: string.byte(s, 1, -1) pushes 999,000 values (milliseconds) for one instruction; every value is charged before it runs, so the first call spends what is left of the budget (the neighbour, the bytes of a line, runs: test_charges.py)
local s = string.rep("a", 999000)
while true do local n = select("#", s:byte(1, -1)) end
