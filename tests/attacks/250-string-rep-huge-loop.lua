-- expect: error reductions_limit
-- limits: {"max_reductions": 1000, "max_heap": 512000000}
-- timeout_ms: 20000
-- max_wall_ms: 500
-- why: one string.rep call makes 100 MiB (tens of milliseconds of copying) for one instruction; a new string is charged by its bytes, and string.rep pays before it builds, so max_reductions 1000 stops the first call before any copying (the neighbour, string.rep of a few KB, runs: test_charges.py)
while true do local t = string.rep("x", 100 << 20) end
