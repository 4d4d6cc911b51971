-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 20000
-- max_wall_ms: 1000
-- why: tonumber of 8 MiB of digits reads every one (tens of milliseconds) for one instruction; each byte of a string tonumber reads is charged, one reduction per 4 (the neighbour, tonumber of ordinary numbers, runs: test_charges.py)
local s = string.rep("1", 8 << 20)
while true do local n = tonumber(s) end
