-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: string.upper maps 16 MiB byte by byte for one instruction; each byte is charged, one reduction per 4, before it runs (the neighbour, upper of a line, runs: test_charges.py)
local s = string.rep("a", 16 << 20)
while true do local u = s:upper() end
