-- expect: error reductions_limit
-- limits: {"max_heap": 67108864, "max_reductions": 20000000}
-- timeout_ms: 20000
-- why: string.rep runs a full collection first when its result would not fit; with many live closures a loop of large reps buys a full collection per iteration, which must be billed
local keep = {}
for i = 1, 200000 do keep[i] = function() return i end end
while true do local s = string.rep("x", 20 << 20) end
