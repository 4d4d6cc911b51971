-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: sorting 100,000 numbers takes tens of milliseconds in C for one instruction, and the table is built once: a loop of sorts under max_reductions 1,000,000 would run for hours; a sort is charged four reductions per value per level (6.8 million here) before it sorts (the neighbour, sorting 10,000 values, runs: test_charges.py)
local t = {}
for i = 1, 100000 do t[i] = (i * 7919) % 100003 end
while true do table.sort(t) end
