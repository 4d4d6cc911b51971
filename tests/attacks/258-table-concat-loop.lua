-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000, "max_heap": 512000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: table.concat of 32 items of 1 MiB copies 32 MiB for one instruction, and the table is built once; its items and their bytes are charged before it builds (the neighbour, concat of a list of lines, runs: test_charges.py)
local piece = string.rep("x", 1 << 20)
local t = {}
for i = 1, 32 do t[i] = piece end
while true do local s = table.concat(t) end
