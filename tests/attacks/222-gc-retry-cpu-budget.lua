-- expect: error cpu_limit
-- limits: {"max_heap": 67108864, "max_reductions": "infinity", "cpu_ms": 2000}
-- timeout_ms: 30000
-- why: the same loop of refusals under a CPU budget only: the hook checks the CPU clock only every 16,000 instructions, which here is seconds of collector work; each emergency collection checks the clock itself (and the supervisor checks it from outside)
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
local s = string.rep("x", (16 << 20) + 64)
while true do pcall(function() return s .. s end) end
