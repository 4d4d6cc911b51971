-- expect: error reductions_limit
-- limits: {"max_reductions": 1000, "max_heap": 512000000}
-- timeout_ms: 10000
-- max_wall_ms: 500
-- why: `..` copies its operands into a new string in one VM instruction: doubling a string 26 times makes 64 MiB in about 100 instructions, and each further `..` copies it again; new strings are charged by their bytes (one reduction per 64), so max_reductions 1000 buys at most 64 KB of new strings, not seconds of copying (the neighbour, the same doubling to 1 MiB under a budget that pays for it, completes: test_charges.py)
local s = "x"
for i = 1, 26 do s = s .. s end
while true do local t = s .. "y" end
